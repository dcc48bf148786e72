#include "glassbox/base/config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"

namespace glassbox {
namespace {

enum class Act { kRelu, kGelu, kTanh };
constexpr NameTable<Act, 3> enum_names(Act) {
  return {{{Act::kRelu, "relu"}, {Act::kGelu, "gelu"}, {Act::kTanh, "tanh"}}};
}
static_assert(is_complete_table(enum_names(Act{})));
static_assert(name_of(Act::kTanh) == "tanh");

struct Inner {
  std::vector<std::int64_t> hidden{256, 128};
  Act activation = Act::kRelu;
  void visit(FieldVisitor& v) {
    v.field("hidden", hidden, "hidden sizes");
    v.choice("activation", activation, "activation");
  }
};

struct Outer {
  std::int64_t max_epochs = 10;
  double lr = 1e-3;
  bool deterministic = false;
  std::string name = "x";
  Inner inner;
  void visit(FieldVisitor& v) {
    v.field("max_epochs", max_epochs, "");
    v.field("lr", lr, "");
    v.field("deterministic", deterministic, "");
    v.field("name", name, "");
    v.section("inner", [this](FieldVisitor& s) { inner.visit(s); });
  }
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.one_line();
  }
  return "<no error>";
}

TEST(Config, LoadsValuesAndOverrides) {
  Outer o;
  load_config("max_epochs = 3\nlr = 1\n[inner]\nhidden = [64]\n", "t.toml",
              {"inner.activation=gelu", "deterministic=true", "name=hello"}, visit_fn(o));
  EXPECT_EQ(o.max_epochs, 3);
  EXPECT_DOUBLE_EQ(o.lr, 1.0);  // integers are accepted for floats
  EXPECT_EQ(o.inner.hidden, std::vector<std::int64_t>{64});
  EXPECT_EQ(o.inner.activation, Act::kGelu);
  EXPECT_TRUE(o.deterministic);
  EXPECT_EQ(o.name, "hello");
}

TEST(Config, UnknownKeySuggestsNearest) {
  Outer o;
  const std::string msg = message_of([&] { load_config("max_epoch = 3\n", "t.toml", {}, visit_fn(o)); });
  EXPECT_NE(msg.find("unknown key \"max_epoch\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean \"max_epochs\"?"), std::string::npos) << msg;
  const std::string msg2 = message_of([&] { load_config("", "t.toml", {"inner.hiden=[3]"}, visit_fn(o)); });
  EXPECT_NE(msg2.find("did you mean \"inner.hidden\"?"), std::string::npos) << msg2;
  EXPECT_EQ(msg2.rfind("--set inner.hiden: unknown key", 0), 0u) << msg2;
}

TEST(Config, WrongTypeNamesKeyAndTypes) {
  Outer o;
  const std::string msg = message_of([&] { load_config("max_epochs = \"ten\"\n", "t.toml", {}, visit_fn(o)); });
  EXPECT_NE(msg.find("t.toml: max_epochs must be an integer, got a string ('ten')"), std::string::npos) << msg;
  const std::string msg2 = message_of([&] { load_config("", "t.toml", {"inner.activation=relux"}, visit_fn(o)); });
  EXPECT_NE(msg2.find("is not one of: relu, gelu, tanh"), std::string::npos) << msg2;
  EXPECT_NE(msg2.find("did you mean \"relu\"?"), std::string::npos) << msg2;
  EXPECT_EQ(o.inner.activation, Act::kRelu);
}

TEST(Config, SyntaxErrorGivesPosition) {
  Outer o;
  const std::string msg = message_of([&] { load_config("max_epochs = = 3\n", "t.toml", {}, visit_fn(o)); });
  EXPECT_EQ(msg.rfind("t.toml:1:", 0), 0u) << msg;
}

TEST(Config, TomlAndJsonRoundTrip) {
  Outer a;
  a.max_epochs = 7;
  a.lr = 0.25;
  a.inner.hidden = {1, 2, 3};
  a.inner.activation = Act::kTanh;
  Outer b;
  load_config(to_toml(visit_fn(a)), "roundtrip", {}, visit_fn(b));
  EXPECT_EQ(b.max_epochs, 7);
  EXPECT_DOUBLE_EQ(b.lr, 0.25);
  EXPECT_EQ(b.inner.hidden, a.inner.hidden);
  EXPECT_EQ(b.inner.activation, Act::kTanh);
  Outer c;
  from_json(to_json(visit_fn(a)), "json", visit_fn(c));
  EXPECT_EQ(c.inner.hidden, a.inner.hidden);
  EXPECT_DOUBLE_EQ(c.lr, 0.25);
}

// A list whose items have keys that depend on their "name" (as transform lists do).
struct Step {
  std::string name = "flip";
  double p = 0.5;
  std::vector<double> limit{-15, 15};
  void visit(FieldVisitor& v) {
    v.choice("name", name, {"flip", "rotate"}, "");
    v.field("p", p, "");
    if (name == "rotate") v.field("limit", limit, "");
  }
};
struct Pipeline {
  std::vector<Step> steps{Step{}};
  void visit(FieldVisitor& v) {
    v.section("data", [this](FieldVisitor& s) { s.list("steps", steps, "steps in order"); });
  }
};

TEST(Config, ListsOfTablesReadWriteAndExplainErrors) {
  Pipeline a;
  load_config("[[data.steps]]\nname = \"rotate\"\nlimit = [-5, 5]\n[[data.steps]]\nname = \"flip\"\np = 1.0\n",
              "f.toml", {}, visit_fn(a));
  ASSERT_EQ(a.steps.size(), 2u);
  EXPECT_EQ(a.steps[0].name, "rotate");
  EXPECT_EQ(a.steps[0].limit, (std::vector<double>{-5, 5}));
  EXPECT_DOUBLE_EQ(a.steps[0].p, 0.5);  // a default, not the previous item's
  EXPECT_DOUBLE_EQ(a.steps[1].p, 1.0);
  // Written back as TOML and JSON, read again.
  Pipeline b;
  b.steps.clear();
  load_config(to_toml(visit_fn(a)), "again", {}, visit_fn(b));
  ASSERT_EQ(b.steps.size(), 2u);
  EXPECT_EQ(b.steps[0].limit, (std::vector<double>{-5, 5}));
  Pipeline c;
  from_json(to_json(visit_fn(a)), "json", visit_fn(c));
  ASSERT_EQ(c.steps.size(), 2u);
  EXPECT_EQ(c.steps[1].name, "flip");
  // Absent: the default list stays; an inline list from --set replaces it.
  Pipeline d;
  load_config("", "empty", {}, visit_fn(d));
  EXPECT_EQ(d.steps.size(), 1u);
  load_config("", "empty", {"data.steps=[{name = \"rotate\", limit = [1, 2]}]"}, visit_fn(d));
  ASSERT_EQ(d.steps.size(), 1u);
  EXPECT_EQ(d.steps[0].limit, (std::vector<double>{1, 2}));
  // A key of another item kind names the item.
  Pipeline e;
  EXPECT_EQ(message_of([&] { load_config("[[data.steps]]\nname = \"flip\"\nlimit = 3\n", "f.toml", {}, visit_fn(e)); }),
            "f.toml: unknown key \"data.steps[0].limit\" in [data.steps[0]] (hint: remove it; see "
            "docs/configuration.md for the keys)");
  EXPECT_NE(message_of([&] {
              load_config("[[data.steps]]\nname = \"rotat\"\n", "f.toml", {}, visit_fn(e));
            }).find("did you mean \"rotate\"?"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              load_config("[data]\nsteps = 3\n", "f.toml", {}, visit_fn(e));
            }).find("data.steps must be a list of tables"),
            std::string::npos);
}

TEST(Config, ClosestMatch) {
  EXPECT_EQ(closest_match("lerning_rate", {"learning_rate", "momentum"}), "learning_rate");
  EXPECT_EQ(closest_match("zzzzzz", {"learning_rate", "momentum"}), "");
}

}  // namespace
}  // namespace glassbox
