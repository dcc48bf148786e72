#!/usr/bin/env python3
"""Self-test of scripts/check_layering.py: small trees with and without violations.

    python3 tests/layering_test.py        # unittest; CTest runs it as `layering_selftest`
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_layering.py"


class LayeringTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="gb-layering-")
        self.root = Path(self._tmp.name)
        # A clean baseline: every rule exercised on the allowed side.
        self.write("glassbox/base/error.h", '#pragma once\n#include <string>\n')
        self.write("glassbox/core/device.h", '#include <c10/core/Device.h>\n#include "glassbox/base/error.h"\n')
        self.write("glassbox/nn/model.h", '#include <torch/nn/module.h>\n#include "glassbox/core/device.h"\n')
        self.write("glassbox/nn/model.cpp", '#include "glassbox/nn/model.h"\n#include <torch/torch.h>\n')
        self.write("glassbox/train/trainer.cpp", '#include "glassbox/base/error.h"\n#include "glassbox/nn/model.h"\n')
        self.write("glassbox/testing/testing.h", '#include "glassbox/base/error.h"\n')
        self.write("glassbox/nn/model_test.cpp",
                   '#include "glassbox/nn/model.h"\n#include "glassbox/testing/testing.h"\n#include <torch/torch.h>\n')
        self.write("glassbox/serve/engine/api.h", '#include <string>\n#include "glassbox/base/error.h"\n')
        self.write("glassbox/serve/engine/backend.h", '#include <ATen/core/Tensor.h>\n#include "glassbox/serve/engine/api.h"\n')
        self.write("glassbox/serve/http/server.cpp", '#include "glassbox/serve/engine/api.h"\n')
        self.write("glassbox/cli/main.cpp", '#include "glassbox/train/trainer.h"\n#include "glassbox/serve/http/server.h"\n')
        self.write("glassbox/core/doc.h", textwrap.dedent("""\
            // Usage:
            //   #include "glassbox/train/trainer.h"   (a comment, not an include)
            /*
            #include "glassbox/train/trainer.h"
            */
            #include "device.h"
            """))

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def write(self, rel: str, text: str) -> None:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def check(self) -> tuple[int, str]:
        r = subprocess.run([sys.executable, "-B", str(SCRIPT), "--root", str(self.root)],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr

    def assert_violation(self, needle: str) -> None:
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn(needle, out)

    def test_clean_tree_passes(self) -> None:
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        self.assertIn("0 violations", out)

    def test_cmake_deps_outside_the_graph_fail(self) -> None:
        self.write("glassbox/data/CMakeLists.txt", "gb_add_library(data TORCH\n  SOURCES a.cpp\n  DEPS core nn)\n")
        self.assert_violation("glassbox/data/CMakeLists.txt:1: library data of module data may not depend on nn")

    def test_cmake_deps_inside_the_graph_pass(self) -> None:
        self.write("glassbox/train/CMakeLists.txt", "gb_add_library(train TORCH SOURCES t.cpp DEPS data nn metrics)\n")
        self.write("glassbox/cli/CMakeLists.txt", "gb_add_library(cli SOURCES m.cpp DEPS app bench serve_http\n"
                   "  EXTERNAL CLI11::CLI11)\n")
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_graph_is_read_from_the_trees_architecture_doc(self) -> None:
        # A tree whose documented graph lets core use nothing but base: nn may not be reached.
        self.write("docs/architecture.md", "# A\n\n## Layering\n\n```\nbase -> (std)\ncore -> base\n"
                   "nn -> core\ntrain -> nn\ntesting -> base\ncli -> train\nserve/engine -> core\n"
                   "serve/http -> base\n```\n")
        self.write("glassbox/core/extra.cpp", '#include "glassbox/nn/model.h"\n')
        self.assert_violation("glassbox/core/extra.cpp:1: module core may not include nn")

    def test_upward_include_fails(self) -> None:
        self.write("glassbox/core/bad.cpp", '#include <vector>\n#include "glassbox/train/trainer.h"\n')
        self.assert_violation("glassbox/core/bad.cpp:2: module core may not include train")

    def test_sibling_include_fails(self) -> None:
        self.write("glassbox/data/x.h", '#include "glassbox/nn/model.h"\n')
        self.assert_violation("glassbox/data/x.h:1: module data may not include nn")

    def test_report_may_not_reach_train(self) -> None:
        self.write("glassbox/report/html.cpp", '#include "glassbox/metrics/m.h"\n#include "glassbox/train/t.h"\n')
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("html.cpp:2: module report may not include train", out)
        self.assertNotIn("html.cpp:1:", out)

    def test_engine_may_not_include_train(self) -> None:
        self.write("glassbox/serve/engine/pool.cpp", '#include "glassbox/train/trainer.h"\n')
        self.assert_violation("glassbox/serve/engine/pool.cpp:1: module serve/engine may not include train")

    def test_relative_include_is_resolved(self) -> None:
        self.write("glassbox/base/rel.cpp", '#include "../core/device.h"\n')
        self.assert_violation("glassbox/base/rel.cpp:1: module base may not include core")

    def test_testing_only_from_tests(self) -> None:
        self.write("glassbox/nn/model2.cpp", '#include "glassbox/testing/testing.h"\n')
        self.assert_violation("glassbox/nn/model2.cpp:1: module nn may not include testing")

    def test_torch_umbrella_in_public_header_fails(self) -> None:
        self.write("glassbox/nn/layer.h", '#pragma once\n#include <torch/torch.h>\n')
        self.assert_violation("glassbox/nn/layer.h:2: module nn may not include <torch/torch.h>")

    def test_torch_in_base_fails(self) -> None:
        self.write("glassbox/base/clock.cpp", '#include <chrono>\n#include <c10/util/Exception.h>\n')
        self.assert_violation("glassbox/base/clock.cpp:2: module base may not include <c10/util/Exception.h>")

    def test_http_may_not_reach_torch_through_engine(self) -> None:
        self.write("glassbox/serve/http/routes.cpp", '#include "glassbox/serve/engine/backend.h"\n')
        self.assert_violation("glassbox/serve/http/routes.cpp:1: module serve/http may not include serve/engine")

    def test_http_may_not_include_torch(self) -> None:
        self.write("glassbox/serve/http/codec.cpp", '#include <torch/types.h>\n')
        self.assert_violation("codec.cpp:1: module serve/http may not include <torch/types.h>")

    def test_unknown_module_fails(self) -> None:
        self.write("glassbox/misc/x.cpp", '#include <vector>\n')
        self.assert_violation("module misc is not in the layering graph")

    def test_several_violations_all_reported(self) -> None:
        self.write("glassbox/core/a.cpp", '#include "glassbox/nn/model.h"\n')
        self.write("glassbox/core/b.cpp", '#include "glassbox/data/d.h"\n')
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("2 violations", out)

    def test_repository_itself(self) -> None:
        """The real tree runs without crashing (pass/fail is the `layering` test's job)."""
        r = subprocess.run([sys.executable, "-B", str(SCRIPT)], capture_output=True, text=True, timeout=60)
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        self.assertIn("layering:", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
