# Make targets wrap the scripts in scripts/ (see docs/development.md).
#
#   make run          set up if needed, build the CLI, run `glassbox quickstart` (the main job)
#   make test         set up if needed, build, run every test but those labelled slow or cuda
#   make test-asan    the unit tests under AddressSanitizer + UBSan (build-asan/)
#   make bench        build the CLI, run `glassbox bench train`
#   make setup        install dependencies and build (idempotent)
#   make build        build everything in build/
#   make format       clang-format -i on our C++ files;  make format-check: report only
#   make tidy         clang-tidy on TIDY_FILES with build/compile_commands.json
#   make layering     check #include lines against the module graph of docs/architecture.md

SHELL := /bin/bash
GLASSBOX := build/glassbox/cli/glassbox
CLANG_FORMAT ?= clang-format
CLANG_TIDY ?= clang-tidy
FORMAT_DIRS := glassbox examples bench tests
FORMAT_FILES = $(shell find $(FORMAT_DIRS) -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' \) \
                 -not -path '*/testdata/*' 2>/dev/null | sort)
TIDY_FILES ?= glassbox/base/error.cpp glassbox/base/files.cpp glassbox/core/device.cpp glassbox/core/seed.cpp
# Ask for the CLI's help instead of the quickstart with: make run ARGS=--help
ARGS ?= quickstart
BENCH_ARGS ?= train

.PHONY: help setup build run test test-asan bench format format-check tidy layering
.DEFAULT_GOAL := help

help:
	@awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print } /^$$/ { exit }' Makefile

setup:
	scripts/setup

build:
	GB_SKIP_BUILD=1 scripts/setup
	scripts/build

run:
	GB_SKIP_BUILD=1 scripts/setup
	scripts/build glassbox
	$(GLASSBOX) $(ARGS)

test:
	scripts/test

test-asan:
	scripts/test --asan

bench:
	GB_SKIP_BUILD=1 scripts/setup
	scripts/build glassbox
	$(GLASSBOX) bench $(BENCH_ARGS)

layering:
	python3 scripts/check_layering.py

format:
	@command -v $(CLANG_FORMAT) >/dev/null || { echo "no $(CLANG_FORMAT): scripts/setup --lint-tools"; exit 1; }
	$(CLANG_FORMAT) -i $(FORMAT_FILES)

format-check:
	@command -v $(CLANG_FORMAT) >/dev/null || { echo "no $(CLANG_FORMAT): scripts/setup --lint-tools"; exit 1; }
	$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES)
	@echo "format-check: $(words $(FORMAT_FILES)) files formatted"

# clang-tidy reads a copy of build/compile_commands.json in build-tidy/ whose precompiled-header
# include points at a copy of CMake's cmake_pch.hxx: clang cannot read GCC's .gch beside the original.
define TIDY_DB
import json, os, re, shutil
os.makedirs("build-tidy", exist_ok=True)
db = json.load(open("build/compile_commands.json"))
for e in db:
    for m in re.findall(r"-include (\S+/cmake_pch\.hxx)", e["command"]):
        shutil.copyfile(m, "build-tidy/cmake_pch.hxx")
        e["command"] = e["command"].replace(m, os.path.abspath("build-tidy/cmake_pch.hxx"))
    e["command"] = e["command"].replace(" -Winvalid-pch", "")
json.dump(db, open("build-tidy/compile_commands.json", "w"), indent=1)
endef
export TIDY_DB

tidy:
	@command -v $(CLANG_TIDY) >/dev/null || { echo "no $(CLANG_TIDY): scripts/setup --lint-tools"; exit 1; }
	@test -f build/compile_commands.json || { GB_SKIP_BUILD=1 scripts/setup && scripts/build; }
	@python3 -c "$$TIDY_DB"
	$(CLANG_TIDY) -p build-tidy --quiet $(TIDY_FILES)
