#include "glassbox/train/scheduler.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/testing/testing.h"

namespace glassbox::train {
namespace {

using nlohmann::json;

const std::vector<double> kBase{0.1, 0.03};

// The glassbox::Error thrown by f, or a test failure.
Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no glassbox::Error thrown";
  return Error(ErrorCode::kInternal, "<no error>");
}

// Relative error (0 where both are 0; infinite where only the reference is 0).
double rel_error(double got, double want) {
  const double d = std::abs(got - want);
  if (d == 0) return 0.0;
  return want == 0 ? std::numeric_limits<double>::infinity() : d / std::abs(want);
}

// Relative error <= 1e-9, or absolute error <= 1e-15 near zero.
bool close(double got, double want) { return std::abs(got - want) <= 1e-15 || rel_error(got, want) <= 1e-9; }

// ---- reference: the same options through torch.optim.lr_scheduler ------------------------------

const json& reference() {
  static const json kDoc = json::parse(glassbox::testing::run_python("tests/reference/schedulers.py"));
  return kDoc;
}

TEST(SchedulerReference, MatchesPyTorchAtEveryStep) {
  const json& doc = reference();
  const auto base = doc.at("base_lrs").get<std::vector<double>>();
  ASSERT_EQ(base, kBase);
  double worst = 0.0;
  std::string worst_case;
  std::int64_t compared = 0;
  std::int64_t differ = 0;
  for (const json& c : doc.at("cases")) {
    const std::string label = c.at("label");
    SCOPED_TRACE(label);
    SchedulerOptions o;
    from_json(c.at("options"), label, visit_fn(o));
    auto sched = make_scheduler(o, base, c.at("steps_per_epoch"), c.at("max_epochs"));
    const json& lrs = c.at("lrs");
    const json& moms = c.at("momentums");
    const auto steps = c.at("steps").get<std::int64_t>();
    ASSERT_EQ(static_cast<std::int64_t>(lrs.size()), steps + 1);
    const bool has_metrics = c.contains("metrics");
    EXPECT_EQ(sched->needs_metric(), has_metrics);
    const bool cycles = o.name == SchedulerKind::kOnecycle && o.cycle_momentum;
    double case_worst = 0.0;
    for (std::int64_t k = 0; k <= steps; ++k) {
      if (k > 0) sched->step(has_metrics ? c.at("metrics").at(k - 1).get<double>() : std::nan(""));
      // Exact resume half-way: save, round-trip the JSON text, load into a freshly built scheduler.
      if (k == steps / 2) {
        auto resumed = make_scheduler(o, base, c.at("steps_per_epoch"), c.at("max_epochs"));
        resumed->load_state(json::parse(sched->state().dump()));
        sched = std::move(resumed);
      }
      ASSERT_EQ(sched->steps_taken(), k);
      for (std::size_t g = 0; g < base.size(); ++g) {
        const double want = lrs.at(k).at(g);
        const double got = sched->lrs().at(g);
        if (want != 0) case_worst = std::max(case_worst, rel_error(got, want));
        if (got != want) ++differ;
        ++compared;
        ASSERT_TRUE(close(got, want)) << "step " << k << " group " << g << ": glassbox " << got << ", torch " << want
                                      << " (relative error " << rel_error(got, want) << ")";
        if (cycles) {
          ASSERT_EQ(sched->momentums().size(), base.size());
          const double mw = moms.at(k).at(g);
          ASSERT_TRUE(close(sched->momentums()[g], mw)) << "momentum, step " << k << " group " << g;
        } else {
          ASSERT_TRUE(sched->momentums().empty());
          ASSERT_EQ(moms.at(k).at(g).get<double>(), 0.9);  // PyTorch left the momentum alone too
        }
      }
    }
    if (case_worst > worst) {
      worst = case_worst;
      worst_case = label;
    }
  }
  std::cout << "[ reference ] " << doc.at("cases").size() << " cases vs torch " << doc.at("torch").get<std::string>()
            << ": max relative error " << worst << (worst_case.empty() ? "" : " (" + worst_case + ")") << "; " << differ
            << " of " << compared << " lrs differ from torch's in any bit\n";
  RecordProperty("max_relative_error", std::to_string(worst));
}

TEST(SchedulerReference, OneCycleFailsPastTotalStepsLikePyTorch) {
  SchedulerOptions o;
  o.name = SchedulerKind::kOnecycle;
  o.total_steps = 10;
  auto s = make_scheduler(o, kBase, 0, 0);
  for (int k = 0; k < 10; ++k) s->step();  // PyTorch allows total_steps calls
  const std::vector<double> last = s->lrs();
  const Error e = error_of([&] { s->step(); });
  EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(e.message().find("total_steps = 10"), std::string::npos) << e.one_line();
  EXPECT_NE(e.hint().find("scheduler.total_steps"), std::string::npos) << e.one_line();
  EXPECT_EQ(s->lrs(), last);
  EXPECT_EQ(s->steps_taken(), 10);
}

// ---- state -------------------------------------------------------------------------------------

SchedulerOptions named(const std::string& name) {
  SchedulerOptions o;
  o.name = enum_of<SchedulerKind>(name);
  o.step_size = 7;
  o.milestones = {5, 9, 30};
  o.gamma = 0.7;
  o.t_max = 13;
  o.eta_min = 1e-3;
  o.t_0 = 4;
  o.t_mult = 2;
  o.total_steps = 60;
  o.patience = 2;
  o.cooldown = 1;
  return o;
}

TEST(SchedulerState, ResumeContinuesBitForBit) {
  for (const std::string name : {"none", "step", "multistep", "exponential", "cosine", "cosine_warm_restarts",
                                 "onecycle", "linear", "plateau"}) {
    for (std::int64_t warmup : {0, 6}) {
      SchedulerOptions o = named(name);
      if (warmup > 0 && (name == "onecycle" || name == "plateau")) continue;
      o.warmup_steps = warmup;
      SCOPED_TRACE(name + " warmup " + std::to_string(warmup));
      const auto metric = [](int k) { return k % 5 == 0 ? 1.0 / (k + 1) : 2.0; };
      for (int cut : {0, 3, 6, 7, 25}) {
        auto a = make_scheduler(o, kBase, 0, 0);
        for (int k = 0; k < cut; ++k) a->step(metric(k));
        const std::string text = a->state().dump();
        auto b = make_scheduler(o, kBase, 0, 0);
        b->load_state(json::parse(text));
        EXPECT_EQ(b->state(), a->state());
        for (int k = cut; k < 60; ++k) {
          ASSERT_EQ(b->lrs(), a->lrs()) << "step " << k;
          ASSERT_EQ(b->momentums(), a->momentums());
          a->step(metric(k));
          b->step(metric(k));
        }
        EXPECT_EQ(b->name(), a->name());
      }
    }
  }
}

TEST(SchedulerState, PlateauInfiniteBestSurvivesText) {
  SchedulerOptions o;
  o.name = SchedulerKind::kPlateau;
  auto s = make_scheduler(o, kBase, 0, 0);
  const json st = json::parse(s->state().dump());
  EXPECT_EQ(st.at("best"), "inf");
  o.mode = MetricMode::kMax;
  auto m = make_scheduler(o, kBase, 0, 0);
  m->step(std::numeric_limits<double>::infinity());  // best becomes +inf in max mode
  auto m2 = make_scheduler(o, kBase, 0, 0);
  m2->load_state(json::parse(m->state().dump()));
  EXPECT_EQ(m2->state(), m->state());
  EXPECT_EQ(m2->state().at("best"), "inf");
}

TEST(SchedulerState, MalformedStateIsDataLossNamingTheField) {
  SchedulerOptions o = named("cosine_warm_restarts");
  auto s = make_scheduler(o, kBase, 0, 0);
  for (int k = 0; k < 5; ++k) s->step();
  const json good = s->state();
  const json before = s->state();
  struct Case {
    std::string field;
    std::function<void(json&)> corrupt;
  };
  const std::vector<Case> cases = {
      {"last_epoch", [](json& j) { j.erase("last_epoch"); }},
      {"last_epoch", [](json& j) { j["last_epoch"] = "five"; }},
      {"last_epoch", [](json& j) { j["last_epoch"] = -1; }},
      {"lrs", [](json& j) { j["lrs"] = 0.1; }},
      {"lrs",
       [](json& j) {
         j["lrs"] = json::array({0.1, "x"});
       }},
      {"lrs", [](json& j) { j["lrs"] = json::array({0.1}); }},
      {"base_lrs", [](json& j) { j.erase("base_lrs"); }},
      {"momentums", [](json& j) { j["momentums"] = json::array({0.9}); }},
      {"t_cur", [](json& j) { j.erase("t_cur"); }},
      {"t_i", [](json& j) { j["t_i"] = 2.5; }},
      {"t_cur", [](json& j) { j["t_cur"] = 99; }},
      {"name", [](json& j) { j["name"] = 3; }},
  };
  for (const auto& c : cases) {
    json bad = good;
    c.corrupt(bad);
    const Error e = error_of([&] { s->load_state(bad); });
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss) << c.field << ": " << e.one_line();
    EXPECT_NE(e.message().find(c.field), std::string::npos) << e.one_line();
    EXPECT_EQ(s->state(), before) << "a failed load changed the scheduler (" << c.field << ")";
  }
  EXPECT_EQ(error_of([&] { s->load_state(json::array()); }).code(), ErrorCode::kDataLoss);

  // A well-formed state of something else.
  auto other = make_scheduler(named("cosine"), kBase, 0, 0);
  const Error wrong = error_of([&] { s->load_state(other->state()); });
  EXPECT_EQ(wrong.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(wrong.message().find("\"cosine\""), std::string::npos) << wrong.one_line();
  auto three = make_scheduler(o, {0.1, 0.2, 0.3}, 0, 0);
  EXPECT_EQ(error_of([&] { s->load_state(three->state()); }).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(s->state(), before);

  // Nested: the warm-up wrapper names the field inside the main schedule, and stays unchanged.
  SchedulerOptions w = named("cosine_warm_restarts");
  w.warmup_steps = 3;
  auto ws = make_scheduler(w, kBase, 0, 0);
  for (int k = 0; k < 5; ++k) ws->step();
  const json wbefore = ws->state();
  json wbad = wbefore;
  wbad["main"].erase("t_i");
  const Error we = error_of([&] { ws->load_state(wbad); });
  EXPECT_EQ(we.code(), ErrorCode::kDataLoss);
  EXPECT_NE(we.message().find("t_i"), std::string::npos) << we.one_line();
  EXPECT_EQ(ws->state(), wbefore);
}

// ---- options -----------------------------------------------------------------------------------

TEST(SchedulerOptions, BadValuesAreInvalidArgumentNamingTheField) {
  struct Case {
    std::string field;
    std::string name;  // scheduler.name
    std::function<void(SchedulerOptions&)> set;
  };
  using O = SchedulerOptions;
  const std::vector<Case> cases = {
      {"scheduler.step_size", "step", [](O&) {}},
      {"scheduler.gamma", "exponential", [](O& o) { o.gamma = 0; }},
      {"scheduler.milestones", "multistep", [](O&) {}},
      {"scheduler.milestones", "multistep",
       [](O& o) {
         o.milestones = {10, 5};
       }},
      {"scheduler.t_max", "cosine", [](O& o) { o.t_max = -1; }},
      {"scheduler.eta_min", "cosine", [](O& o) { o.eta_min = -1; }},
      {"scheduler.t_0", "cosine_warm_restarts", [](O&) {}},
      {"scheduler.t_mult", "cosine_warm_restarts", [](O& o) { o.t_0 = 3, o.t_mult = 0; }},
      {"scheduler.max_lr", "onecycle", [](O& o) { o.max_lr = {-1}; }},
      {"scheduler.pct_start", "onecycle", [](O& o) { o.pct_start = 1.5; }},
      {"scheduler.div_factor", "onecycle", [](O& o) { o.div_factor = 0; }},
      {"scheduler.final_div_factor", "onecycle", [](O& o) { o.final_div_factor = -2; }},
      {"scheduler.base_momentum", "onecycle", [](O& o) { o.base_momentum = 2; }},
      {"scheduler.total_steps", "onecycle", [](O& o) { o.total_steps = -3; }},
      {"scheduler.start_factor", "linear", [](O& o) { o.start_factor = 0; }},
      {"scheduler.end_factor", "linear", [](O& o) { o.end_factor = 1.5; }},
      {"scheduler.total_iters", "linear", [](O& o) { o.total_iters = 0; }},
      {"scheduler.monitor", "plateau", [](O& o) { o.monitor = ""; }},
      {"scheduler.factor", "plateau", [](O& o) { o.factor = 1.0; }},
      {"scheduler.patience", "plateau", [](O& o) { o.patience = -1; }},
      {"scheduler.cooldown", "plateau", [](O& o) { o.cooldown = -1; }},
      {"scheduler.min_lr", "plateau", [](O& o) { o.min_lr = {-1}; }},
      {"scheduler.eps", "plateau", [](O& o) { o.eps = -1; }},
      {"scheduler.warmup_steps", "none", [](O& o) { o.warmup_steps = -1; }},
      {"scheduler.warmup_start_factor", "step",
       [](O& o) { o.step_size = 3, o.warmup_steps = 5, o.warmup_start_factor = 0; }},
      {"scheduler.warmup_steps", "onecycle", [](O& o) { o.warmup_steps = 5; }},
      {"scheduler.warmup_steps", "plateau", [](O& o) { o.warmup_steps = 5; }},
  };
  for (const auto& c : cases) {
    SchedulerOptions o;
    o.name = enum_of<SchedulerKind>(c.name);
    c.set(o);
    const Error e = error_of([&] { o.validate(); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << c.field << ": " << e.one_line();
    EXPECT_NE(e.message().find(c.field), std::string::npos) << c.field << ": " << e.one_line();
    EXPECT_FALSE(e.hint().empty()) << c.field;
    // make_scheduler validates too.
    EXPECT_EQ(error_of([&] { make_scheduler(o, kBase, 10, 10); }).code(), ErrorCode::kInvalidArgument) << c.field;
  }
  EXPECT_NO_THROW(SchedulerOptions().validate());
}

TEST(SchedulerOptions, BuildTimeChecksNameTheField) {
  SchedulerOptions o;
  o.name = SchedulerKind::kOnecycle;  // total_steps = 0 and nothing to derive it from
  Error e = error_of([&] { make_scheduler(o, kBase, 100, 0); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("scheduler.total_steps"), std::string::npos) << e.one_line();
  o.max_lr = {0.1, 0.2, 0.3};  // three values for two groups
  o.total_steps = 10;
  e = error_of([&] { make_scheduler(o, kBase, 0, 0); });
  EXPECT_NE(e.message().find("scheduler.max_lr"), std::string::npos) << e.one_line();
  o.max_lr = {};
  o.pct_start = 0.1;  // first phase ends at step 0: PyTorch divides 0 by 0
  e = error_of([&] { make_scheduler(o, kBase, 0, 0); });
  EXPECT_NE(e.message().find("scheduler.pct_start"), std::string::npos) << e.one_line();

  SchedulerOptions c;
  c.name = SchedulerKind::kCosine;
  c.warmup_steps = 10;
  e = error_of([&] { make_scheduler(c, kBase, 5, 2); });  // 2 epochs (interval "epoch"), all warm-up
  EXPECT_NE(e.message().find("scheduler.t_max"), std::string::npos) << e.one_line();
  EXPECT_EQ(error_of([&] { make_scheduler(SchedulerOptions(), {}, 1, 1); }).code(), ErrorCode::kInvalidArgument);
}

TEST(SchedulerOptions, DerivedLengthsFollowTheInterval) {
  SchedulerOptions o;
  o.name = SchedulerKind::kOnecycle;
  o.interval = SchedulerInterval::kStep;
  auto by_step = make_scheduler(o, kBase, 7, 3);  // 21 steps
  for (int k = 0; k < 21; ++k) by_step->step();
  EXPECT_THROW(by_step->step(), Error);
  o.interval = SchedulerInterval::kEpoch;
  auto by_epoch = make_scheduler(o, kBase, 7, 3);  // 3 steps
  for (int k = 0; k < 3; ++k) by_epoch->step();
  EXPECT_THROW(by_epoch->step(), Error);

  SchedulerOptions c;
  c.name = SchedulerKind::kCosine;
  c.interval = SchedulerInterval::kStep;
  c.warmup_steps = 4;
  auto s = make_scheduler(c, kBase, 5, 2);  // t_max = 10 - 4
  for (int k = 0; k < 10; ++k) s->step();
  EXPECT_DOUBLE_EQ(s->lrs()[0], 0.0);  // annealed to eta_min exactly at the end of the run
  EXPECT_EQ(s->name(), "cosine+warmup");
}

TEST(SchedulerOptions, TomlKeysAndRoundTrip) {
  SchedulerOptions o;
  load_config(
      "name = \"cosine_warm_restarts\"\ninterval = \"step\"\nt_0 = 50\nt_mult = 2\neta_min = 1e-5\n"
      "warmup_steps = 100\nwarmup_start_factor = 0.01\nmin_lr = 1e-6\n",
      "s.toml", {"max_lr=[0.1, 0.01]"}, visit_fn(o));
  EXPECT_EQ(o.name, SchedulerKind::kCosineWarmRestarts);
  EXPECT_EQ(o.interval, SchedulerInterval::kStep);
  EXPECT_EQ(o.t_0, 50);
  EXPECT_EQ(o.t_mult, 2);
  EXPECT_EQ(o.warmup_steps, 100);
  EXPECT_EQ(o.min_lr, std::vector<double>{1e-6});  // a scalar is a one-element list
  EXPECT_EQ(o.max_lr, (std::vector<double>{0.1, 0.01}));
  SchedulerOptions back;
  from_json(to_json(visit_fn(o)), "json", visit_fn(back));
  EXPECT_EQ(to_json(visit_fn(back)), to_json(visit_fn(o)));
  SchedulerOptions t;
  load_config(to_toml(visit_fn(o)), "toml", {}, visit_fn(t));
  EXPECT_EQ(to_json(visit_fn(t)), to_json(visit_fn(o)));

  const Error e = error_of([&] { load_config("T_max = 10\n", "s.toml", {}, visit_fn(o)); });
  EXPECT_NE(e.one_line().find("t_max"), std::string::npos) << e.one_line();
  const Error c = error_of([&] { load_config("name = \"cosin\"\n", "s.toml", {}, visit_fn(o)); });
  EXPECT_NE(c.one_line().find("did you mean \"cosine\""), std::string::npos) << c.one_line();
}

TEST(SchedulerOptions, EveryTomlExampleInTheGuideBuilds) {
  std::ifstream in(glassbox::testing::source_dir() / "docs" / "schedulers.md");
  ASSERT_TRUE(in) << "docs/schedulers.md";
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  struct Config {
    SchedulerOptions scheduler;
    void visit(FieldVisitor& v) {
      v.section("scheduler", [this](FieldVisitor& s) { scheduler.visit(s); });
    }
  };
  int examples = 0;
  for (std::size_t at = doc.find("```toml\n"); at != std::string::npos; at = doc.find("```toml\n", at)) {
    at += 8;
    const std::string block = doc.substr(at, doc.find("```", at) - at);
    SCOPED_TRACE(block);
    Config c;
    load_config(block, "docs/schedulers.md", {}, visit_fn(c));
    EXPECT_NO_THROW(make_scheduler(c.scheduler, kBase, 1000, 10));
    ++examples;
  }
  EXPECT_GE(examples, 10);
}

TEST(Scheduler, PlateauCountsNanAsNoImprovement) {
  SchedulerOptions o;
  o.name = SchedulerKind::kPlateau;
  o.patience = 1;
  auto s = make_scheduler(o, kBase, 0, 0);
  s->step(1.0);
  s->step();  // NaN: bad epoch 1
  EXPECT_EQ(s->lrs(), kBase);
  s->step(std::nan(""));  // bad epoch 2 > patience
  EXPECT_DOUBLE_EQ(s->lrs()[0], 0.1 * 0.1);
}

}  // namespace
}  // namespace glassbox::train
