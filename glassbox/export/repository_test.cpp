// Model repository and config.pbtxt: the export default, parsing and its one-line errors, the
// semantic checks, atomic writes of versions, and the reference tests against Triton's own
// message definition in PyPI's tritonclient (tests/reference/triton_config_ref.py).
// Over 600 lines: most of it is the table of 36 validation errors, each with its exact message,
// which reads best as one list.
#include "glassbox/export/repository.h"

#include <filesystem>
#include <functional>
#include <map>

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/export/model_config.h"
#include "glassbox/testing/testing.h"

namespace glassbox::exporter {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::MessageDifferencer;

nn::ModelContract fashion_contract() {
  nn::ModelContract c;
  c.name = "ignored";
  c.architecture = "cnn";
  c.input_shape = {1, 28, 28};
  c.layout = nn::InputLayout::kNCHW;
  c.num_classes = 10;
  c.scale = 1.0 / 255.0;
  c.mean = {0.286};
  c.std = {0.353};
  c.channel_order = nn::ChannelOrder::kGray;
  c.labels = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  return c;
}

nn::ModelContract features_contract() {
  nn::ModelContract c;
  c.architecture = "mlp";
  c.input_shape = {20};
  c.layout = nn::InputLayout::kNC;
  c.num_classes = 3;
  c.channel_order = nn::ChannelOrder::kNone;
  return c;
}

// Every field glassbox's message has, filled with values a server accepts.
triton::ModelConfig rich_config() {
  triton::ModelConfig c;
  c.set_name("rich");
  c.set_platform("pytorch_libtorch");
  c.set_backend("pytorch");
  c.set_runtime("libtorch");
  for (std::int64_t v : {1, 2, 5}) c.mutable_version_policy()->mutable_specific()->add_versions(v);
  c.set_max_batch_size(32);
  auto* in0 = c.add_input();
  in0->set_name("INPUT__0");
  in0->set_data_type(triton::TYPE_FP32);
  in0->set_format(triton::ModelInput::FORMAT_NCHW);
  for (std::int64_t d : {3, -1, -1}) in0->add_dims(d);
  auto* in1 = c.add_input();
  in1->set_name("INPUT__1");
  in1->set_data_type(triton::TYPE_INT64);
  in1->add_dims(16);
  for (std::int64_t d : {4, 4}) in1->mutable_reshape()->add_shape(d);
  in1->set_allow_ragged_batch(true);
  in1->set_optional(true);
  auto* in2 = c.add_input();
  in2->set_name("SHAPE");
  in2->set_data_type(triton::TYPE_INT32);
  in2->add_dims(2);
  in2->set_is_shape_tensor(true);
  auto* out0 = c.add_output();
  out0->set_name("OUTPUT__0");
  out0->set_data_type(triton::TYPE_FP16);
  out0->add_dims(10);
  out0->set_label_filename("labels.txt");
  auto* out1 = c.add_output();
  out1->set_name("OUTPUT__1");
  out1->set_data_type(triton::TYPE_BOOL);
  for (std::int64_t d : {2, 8}) out1->add_dims(d);
  out1->mutable_reshape()->add_shape(16);
  out1->set_is_shape_tensor(false);
  auto* g0 = c.add_instance_group();
  g0->set_name("gpus");
  g0->set_kind(triton::ModelInstanceGroup::KIND_GPU);
  g0->set_count(2);
  g0->add_gpus(0);
  g0->add_gpus(1);
  g0->set_passive(true);
  g0->set_host_policy("numa0");
  auto* g1 = c.add_instance_group();
  g1->set_kind(triton::ModelInstanceGroup::KIND_CPU);
  g1->set_count(4);
  c.set_default_model_filename("model.pt");
  auto* b = c.mutable_dynamic_batching();
  b->add_preferred_batch_size(8);
  b->add_preferred_batch_size(32);
  b->set_max_queue_delay_microseconds(250);
  b->set_preserve_ordering(true);
  b->set_priority_levels(3);
  b->set_default_priority_level(2);
  auto* q = b->mutable_default_queue_policy();
  q->set_timeout_action(triton::ModelQueuePolicy::DELAY);
  q->set_default_timeout_microseconds(5000);
  q->set_allow_timeout_override(true);
  q->set_max_queue_size(100);
  auto& p1 = (*b->mutable_priority_queue_policy())[1];
  p1.set_default_timeout_microseconds(1000);
  p1.set_max_queue_size(10);
  (*b->mutable_priority_queue_policy())[3].set_max_queue_size(5);
  (*c.mutable_parameters())["INFERENCE_MODE"].set_string_value("true");
  (*c.mutable_parameters())["glassbox.mean"].set_string_value("0.485,0.456,0.406");
  auto* w = c.add_model_warmup();
  w->set_name("zeros");
  w->set_batch_size(4);
  w->set_count(2);
  auto& wi = (*w->mutable_inputs())["INPUT__0"];
  wi.set_data_type(triton::TYPE_FP32);
  for (std::int64_t d : {3, 32, 32}) wi.add_dims(d);
  wi.set_zero_data(true);
  auto& wi1 = (*w->mutable_inputs())["INPUT__1"];
  wi1.set_data_type(triton::TYPE_INT64);
  wi1.add_dims(16);
  wi1.set_input_data_file("ids.bin");
  auto* w2 = c.add_model_warmup();
  w2->set_name("random");
  w2->set_batch_size(1);
  auto& wr = (*w2->mutable_inputs())["INPUT__0"];
  wr.set_data_type(triton::TYPE_FP32);
  for (std::int64_t d : {3, 8, 8}) wr.add_dims(d);
  wr.set_random_data(true);
  c.mutable_model_transaction_policy()->set_decoupled(false);
  c.mutable_response_cache()->set_enable(true);
  return c;
}

// The error a callable throws (fails the test when it does not throw).
Error error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a glassbox::Error";
  return Error(ErrorCode::kInternal, "no error");
}

ParseConfigOptions expecting(const std::string& name) {
  ParseConfigOptions o;
  o.expected_name = name;
  return o;
}

std::string contents(const fs::path& p) { return read_file(p); }

// Every file under `dir` with its contents.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_file(e.path());
  }
  return out;
}

// Names of entries starting with '.' anywhere under `dir` (temporary files left behind).
std::vector<std::string> hidden_entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().rfind('.', 0) == 0) out.push_back(e.path().string());
  }
  return out;
}

fs::path make_model_file(const fs::path& dir, const std::string& name, const std::string& bytes) {
  const fs::path p = dir / name;
  write_file_atomic(p, bytes);
  return p;
}

// ---------------------------------------------------------------------------------------------
// The configuration glassbox exports

TEST(ModelConfig, ExportDefaultForATorchScriptClassifier) {
  const triton::ModelConfig c = make_model_config("fashion_cnn", fashion_contract());
  EXPECT_EQ(c.name(), "fashion_cnn");
  EXPECT_EQ(c.platform(), "pytorch_libtorch");
  EXPECT_EQ(c.max_batch_size(), 64);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).name(), "INPUT__0");
  EXPECT_EQ(c.input(0).data_type(), triton::TYPE_FP32);
  EXPECT_EQ(c.input(0).format(), triton::ModelInput::FORMAT_NCHW);
  EXPECT_EQ(std::vector<std::int64_t>(c.input(0).dims().begin(), c.input(0).dims().end()),
            (std::vector<std::int64_t>{1, 28, 28}));
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).name(), "OUTPUT__0");
  EXPECT_EQ(c.output(0).data_type(), triton::TYPE_FP32);
  ASSERT_EQ(c.output(0).dims_size(), 1);
  EXPECT_EQ(c.output(0).dims(0), 10);
  EXPECT_EQ(c.output(0).label_filename(), "labels.txt");
  ASSERT_TRUE(c.has_dynamic_batching());
  EXPECT_EQ(std::vector<int>(c.dynamic_batching().preferred_batch_size().begin(),
                             c.dynamic_batching().preferred_batch_size().end()),
            (std::vector<int>{32, 64}));
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 100U);
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).count(), 1);
  EXPECT_EQ(c.instance_group(0).kind(), triton::ModelInstanceGroup::KIND_CPU);
  EXPECT_TRUE(c.version_policy().has_latest());
  EXPECT_EQ(c.version_policy().latest().num_versions(), 1U);
  EXPECT_EQ(c.default_model_filename(), "model.pt");
  // The preprocessing contract travels in parameters.
  const auto& p = c.parameters();
  EXPECT_EQ(p.at("glassbox.contract").string_value(), "contract.json");
  EXPECT_EQ(p.at("glassbox.architecture").string_value(), "cnn");
  EXPECT_EQ(p.at("glassbox.channel_order").string_value(), "gray");
  EXPECT_EQ(p.at("glassbox.mean").string_value(), "0.286");
  EXPECT_EQ(p.at("glassbox.std").string_value(), "0.353");
  EXPECT_EQ(std::stod(p.at("glassbox.scale").string_value()), 1.0 / 255.0);
  EXPECT_EQ(p.at("glassbox.output_kind").string_value(), "logits");
  // Warm-up: one zero sample of the input's shape.
  ASSERT_EQ(c.model_warmup_size(), 1);
  EXPECT_EQ(c.model_warmup(0).batch_size(), 1U);
  const auto& wi = c.model_warmup(0).inputs().at("INPUT__0");
  EXPECT_TRUE(wi.zero_data());
  EXPECT_EQ(wi.dims_size(), 3);

  const std::string text = print_model_config(c);
  EXPECT_EQ(text.rfind("# Triton model configuration", 0), 0U) << text;
  EXPECT_NE(text.find("name: \"fashion_cnn\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dims: [1, 28, 28]"), std::string::npos) << text;
  EXPECT_NE(text.find("preferred_batch_size: [32, 64]"), std::string::npos) << text;
  EXPECT_NE(text.find("kind: KIND_CPU"), std::string::npos) << text;
  EXPECT_EQ(text, print_model_config(parse_model_config(text))) << "printing is not stable";
}

TEST(ModelConfig, ExportOptions) {
  ModelConfigOptions o;
  o.max_batch_size = 8;
  o.preferred_batch_sizes = {8, 2, 2};
  o.max_queue_delay_microseconds = 0;
  o.instance_kind = InstanceKind::kGpu;
  o.instance_count = 2;
  o.gpus = {1};
  o.latest_versions = 2;
  o.warmup = false;
  const triton::ModelConfig c = make_model_config("features", features_contract(), o);
  EXPECT_EQ(c.input(0).format(), triton::ModelInput::FORMAT_NONE);  // a feature vector has no image format
  EXPECT_EQ(c.input(0).dims_size(), 1);
  EXPECT_EQ(c.dynamic_batching().preferred_batch_size_size(), 2);  // sorted, deduplicated
  EXPECT_EQ(c.dynamic_batching().preferred_batch_size(0), 2);
  EXPECT_EQ(c.instance_group(0).kind(), triton::ModelInstanceGroup::KIND_GPU);
  EXPECT_EQ(c.instance_group(0).count(), 2);
  EXPECT_EQ(c.instance_group(0).gpus(0), 1);
  EXPECT_EQ(c.version_policy().latest().num_versions(), 2U);
  EXPECT_EQ(c.model_warmup_size(), 0);
  EXPECT_EQ(c.parameters().count("glassbox.mean"), 0U);  // no normalisation: no parameter

  ModelConfigOptions one;
  one.max_batch_size = 1;
  EXPECT_EQ(make_model_config("m", fashion_contract(), one).dynamic_batching().preferred_batch_size_size(), 1);
  ModelConfigOptions none;
  none.max_batch_size = 0;
  none.dynamic_batching = false;
  const triton::ModelConfig nb = make_model_config("m", fashion_contract(), none);
  EXPECT_FALSE(nb.has_dynamic_batching());
  EXPECT_EQ(nb.model_warmup(0).batch_size(), 1U);

  const auto bad = [](auto mutate) {
    ModelConfigOptions b;
    mutate(b);
    return error_of([&] { make_model_config("m", fashion_contract(), b); }).one_line();
  };
  EXPECT_EQ(bad([](auto& b) { b.max_batch_size = -1; }),
            "max_batch_size is -1 (hint: use 0 (no batch axis) or a positive size, e.g. 64)");
  EXPECT_EQ(
      bad([](auto& b) { b.preferred_batch_sizes = {128}; }),
      "preferred batch size 128 is outside 1..64 (hint: preferred batch sizes must be between 1 and max_batch_size)");
  EXPECT_EQ(bad([](auto& b) { b.max_batch_size = 0; }),
            "dynamic batching with max_batch_size 0 (hint: set max_batch_size > 0 or turn dynamic batching off)");
  EXPECT_EQ(bad([](auto& b) { b.instance_count = 0; }), "instance count is 0 (hint: use at least 1 instance)");
  EXPECT_EQ(bad([](auto& b) { b.gpus = {0}; }),
            "GPUs listed for a CPU instance group (hint: choose the GPU instance kind or drop the GPU list)");
  EXPECT_EQ(bad([](auto& b) { b.latest_versions = 0; }),
            "latest_versions is 0 (hint: serve at least the latest version (1))");
  nn::ModelContract broken = fashion_contract();
  broken.num_classes = 0;
  EXPECT_EQ(error_of([&] { make_model_config("m", broken, {}); }).code(), ErrorCode::kInvalidArgument);
}

TEST(ModelConfig, PrintParseRoundTripIsIdentical) {
  for (const triton::ModelConfig& c : {rich_config(), make_model_config("fashion_cnn", fashion_contract())}) {
    SCOPED_TRACE(c.name());
    const std::string text = print_model_config(c);
    const triton::ModelConfig back = parse_model_config(text, "config.pbtxt", expecting(c.name()));
    std::string diff;
    MessageDifferencer d;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(c, back)) << diff << "\n" << text;
    EXPECT_EQ(print_model_config(back), text);
  }
  // Hand-written Triton style (lists, nested brackets, comments) reads too.
  const triton::ModelConfig hand = parse_model_config(R"(
# a comment
name: "fashion_mlp"
platform: "pytorch_libtorch"          # or "glassbox"
max_batch_size: 64
input  [ { name: "INPUT__0"  data_type: TYPE_FP32  dims: [ 1, 28, 28 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32  dims: [ 10 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100  preferred_batch_size: [ 32, 64 ] }
instance_group [ { count: 2  kind: KIND_CPU } ]
version_policy: { latest { num_versions: 1 } }
parameters { key: "k" value { string_value: "v" } }
)");
  EXPECT_EQ(hand.input(0).dims(2), 28);
  EXPECT_EQ(hand.instance_group(0).count(), 2);
  EXPECT_EQ(hand.parameters().at("k").string_value(), "v");
}

TEST(ModelConfig, ParseErrorsAreOneLineWithPositionAndHint) {
  const auto parse_error = [](const std::string& text) { return error_of([&] { parse_model_config(text); }); };
  const Error fp33 = parse_error(
      "name: \"m\"\nplatform: \"pytorch_libtorch\"\ninput [ { name: \"INPUT__0\" data_type: TYPE_FP33 } ]\n");
  EXPECT_EQ(fp33.code(), ErrorCode::kDataLoss);
  EXPECT_EQ(fp33.one_line(),
            "config.pbtxt:3:49: Unknown enumeration value of \"TYPE_FP33\" for field \"data_type\". (hint: did you "
            "mean TYPE_FP32?)");
  EXPECT_EQ(parse_error("name: \"m\"\nmax_batch_sizes: 4\n").one_line(),
            "config.pbtxt:2:16: Message type \"glassbox.triton.ModelConfig\" has no field named \"max_batch_sizes\". "
            "(hint: did you mean \"max_batch_size\"?)");
  EXPECT_EQ(parse_error("sequence_batching { }").one_line(),
            "config.pbtxt:1:19: Message type \"glassbox.triton.ModelConfig\" has no field named \"sequence_batching\". "
            "(hint: "
            "\"sequence_batching\" is a Triton field glassbox does not support; remove it (docs/export.md lists the "
            "fields))");
  EXPECT_EQ(
      parse_error("name: \"m\"\nmax_batch_size: \n").one_line(),
      "config.pbtxt:3:1: Expected integer, got:  (hint: fix the file's protobuf text format (docs/export.md shows a "
      "complete config.pbtxt))");
  EXPECT_EQ(parse_error("max_batch_size: 99999999999").one_line(),
            "config.pbtxt:1:17: Integer out of range (99999999999) (hint: fix the file's protobuf text format "
            "(docs/export.md "
            "shows a complete config.pbtxt))");
  EXPECT_EQ(parse_error("input [ { name: \"a\" ").one_line(),
            "config.pbtxt:1:21: Expected identifier, got:  (hint: fix the file's protobuf text format (docs/export.md "
            "shows a "
            "complete config.pbtxt))");
  // A server reading a repository made for Triton may skip fields outside glassbox's subset.
  ParseConfigOptions lenient;
  lenient.allow_unknown_fields = true;
  lenient.validate = false;
  const triton::ModelConfig skipped =
      parse_model_config("name: \"m\"\nsequence_batching { max_sequence_idle_microseconds: 5 }\nmax_batch_size: 4",
                         "config.pbtxt", lenient);
  EXPECT_EQ(skipped.max_batch_size(), 4);
  // The file name given is the one errors name.
  const fs::path dir = testing::temp_dir("config_errors");
  write_file_atomic(dir / "m" / "config.pbtxt", "name: \"m\"\nbatch: 1\n");
  EXPECT_EQ(error_of([&] { read_model_config(dir / "m" / "config.pbtxt"); }).message(),
            (dir / "m" / "config.pbtxt").string() +
                ":2:6: Message type \"glassbox.triton.ModelConfig\" has no field named \"batch\".");
  EXPECT_EQ(error_of([&] { read_model_config(dir / "none" / "config.pbtxt"); }).code(), ErrorCode::kNotFound);
}

TEST(ModelConfig, ValidationNamesTheFieldAndTheFix) {
  using Mutate = std::function<void(triton::ModelConfig&)>;
  const std::vector<std::pair<Mutate, std::string>> cases = {
      {[](auto& c) { c.set_name(""); }, "config.pbtxt: name is empty (hint: set name to the model directory's name)"},
      {[](auto& c) { c.set_name("other"); },
       "config.pbtxt: name is \"other\" but the model directory is \"rich\" (hint: set name: \"rich\" or rename the "
       "directory)"},
      {[](auto& c) { c.clear_platform(), c.clear_backend(); },
       "config.pbtxt: platform and backend are both empty (hint: set platform: \"pytorch_libtorch\" for a TorchScript "
       "model)"},
      {[](auto& c) { c.set_max_batch_size(-2); },
       "config.pbtxt: max_batch_size is -2 (hint: use 0 (the model takes no batch axis) or the largest batch, e.g. "
       "64)"},
      {[](auto& c) { c.set_default_model_filename("../model.pt"); },
       "config.pbtxt: default_model_filename \"../model.pt\" is not a file name (hint: give a file name inside the "
       "version "
       "folder, e.g. model.pt)"},
      {[](auto& c) { c.mutable_version_policy()->mutable_latest()->set_num_versions(0); },
       "config.pbtxt: version_policy.latest.num_versions is 0 (hint: serve at least 1 version)"},
      {[](auto& c) { c.mutable_version_policy()->mutable_specific()->clear_versions(); },
       "config.pbtxt: version_policy.specific.versions is empty (hint: list the versions to serve, e.g. [1, 2])"},
      {[](auto& c) { c.mutable_version_policy()->mutable_specific()->set_versions(1, 0); },
       "config.pbtxt: version_policy.specific.versions[1] is 0 (hint: versions are numbered from 1)"},
      {[](auto& c) { c.mutable_version_policy()->mutable_specific()->set_versions(2, 1); },
       "config.pbtxt: version_policy.specific.versions[2] repeats version 1 (hint: list each version once)"},
      {[](auto& c) { c.clear_input(); },
       "config.pbtxt: input is empty (hint: describe the model's input, e.g. input [{ name: \"INPUT__0\" ... }])"},
      {[](auto& c) { c.clear_output(); },
       "config.pbtxt: output is empty (hint: describe the model's output, e.g. output [{ name: \"OUTPUT__0\" ... }])"},
      {[](auto& c) { c.mutable_input(1)->clear_name(); },
       "config.pbtxt: input[1].name is empty (hint: name every tensor, e.g. INPUT__0 / OUTPUT__0)"},
      {[](auto& c) { c.mutable_input(1)->set_name("INPUT__0"); },
       "config.pbtxt: input[1].name \"INPUT__0\" is used twice (hint: give each tensor a distinct name)"},
      {[](auto& c) { c.mutable_output(1)->set_data_type(triton::TYPE_INVALID); },
       "config.pbtxt: output[1].data_type is missing (TYPE_INVALID) (hint: set data_type, e.g. TYPE_FP32)"},
      {[](auto& c) { c.mutable_input(0)->clear_dims(); },
       "config.pbtxt: input[0].dims is empty (hint: give one sample's shape without the batch axis, e.g. dims: [1, 28, "
       "28])"},
      {[](auto& c) { c.mutable_input(0)->set_dims(1, 0); },
       "config.pbtxt: input[0].dims[1] is 0 (hint: each dimension is a positive size or -1 for a variable size)"},
      {[](auto& c) { c.mutable_output(0)->set_dims(0, -3); },
       "config.pbtxt: output[0].dims[0] is -3 (hint: each dimension is a positive size or -1 for a variable size)"},
      {[](auto& c) { c.mutable_input(1)->mutable_reshape()->set_shape(0, 5); },
       "config.pbtxt: input[1].reshape.shape holds 20 elements but dims hold 16 (hint: a reshape must keep the number "
       "of "
       "elements)"},
      {[](auto& c) { c.mutable_input(1)->set_format(triton::ModelInput::FORMAT_NHWC); },
       "config.pbtxt: input[1].format FORMAT_NHWC needs 3 dims, got 1 (hint: give dims [C, H, W] (or [H, W, C]) or "
       "drop format)"},
      {[](auto& c) { c.mutable_output(0)->set_label_filename("../labels.txt"); },
       "config.pbtxt: output[0].label_filename \"../labels.txt\" is not a file name (hint: name a file beside "
       "config.pbtxt, e.g. "
       "labels.txt)"},
      {[](auto& c) { c.mutable_instance_group(1)->set_count(-1); },
       "config.pbtxt: instance_group[1].count is -1 (hint: use a count >= 1 (0 means 1))"},
      {[](auto& c) { c.mutable_instance_group(1)->add_gpus(0); },
       "config.pbtxt: instance_group[1].gpus are listed for kind KIND_CPU (hint: drop gpus or use kind: KIND_GPU)"},
      {[](auto& c) { c.mutable_instance_group(0)->set_gpus(1, -1); },
       "config.pbtxt: instance_group[0].gpus[1] is -1 (hint: GPU indices start at 0)"},
      {[](auto& c) { c.set_max_batch_size(0), c.clear_model_warmup(); },
       "config.pbtxt: dynamic_batching is set but max_batch_size is 0 (hint: set max_batch_size > 0 (the model takes a "
       "batch "
       "axis) or remove dynamic_batching)"},
      {[](auto& c) { c.mutable_dynamic_batching()->set_preferred_batch_size(1, 33); },
       "config.pbtxt: dynamic_batching.preferred_batch_size[1] is 33, outside 1..max_batch_size (32) (hint: use "
       "preferred sizes "
       "between 1 and max_batch_size)"},
      {[](auto& c) { c.mutable_dynamic_batching()->set_default_priority_level(4); },
       "config.pbtxt: dynamic_batching.default_priority_level is 4, outside 1..priority_levels (3) (hint: set "
       "default_priority_level between 1 and priority_levels)"},
      {[](auto& c) { (*c.mutable_dynamic_batching()->mutable_priority_queue_policy())[7].set_max_queue_size(1); },
       "config.pbtxt: dynamic_batching.priority_queue_policy[7] names level 7, outside 1..3 (hint: key "
       "priority_queue_policy by "
       "levels 1..priority_levels)"},
      {[](auto& c) { c.mutable_dynamic_batching()->set_priority_levels(0); },
       "config.pbtxt: dynamic_batching.default_priority_level is set but priority_levels is 0 (hint: set "
       "priority_levels or "
       "remove default_priority_level)"},
      {[](auto& c) {
         c.mutable_dynamic_batching()->set_priority_levels(0),
             c.mutable_dynamic_batching()->set_default_priority_level(0);
       },
       "config.pbtxt: dynamic_batching.priority_queue_policy is set but priority_levels is 0 (hint: set "
       "priority_levels or remove "
       "priority_queue_policy)"},
      {[](auto& c) {
         auto* q = c.mutable_dynamic_batching()->mutable_default_queue_policy();
         q->set_default_timeout_microseconds(0), q->set_allow_timeout_override(false);
       },
       "config.pbtxt: dynamic_batching.default_queue_policy.timeout_action is DELAY without a timeout (hint: set "
       "default_timeout_microseconds or use REJECT)"},
      {[](auto& c) { (*c.mutable_parameters())[""].set_string_value("x"); },
       "config.pbtxt: parameters has an empty key (hint: give each parameter a name)"},
      {[](auto& c) { c.mutable_model_warmup(0)->set_batch_size(64); },
       "config.pbtxt: model_warmup[0].batch_size is 64, outside 1..max_batch_size (32) (hint: use a warm-up batch "
       "between 1 and "
       "max_batch_size)"},
      {[](auto& c) { c.mutable_model_warmup(1)->clear_name(); },
       "config.pbtxt: model_warmup[1].name is empty (hint: name each warm-up sample)"},
      {[](auto& c) {
         (*c.mutable_model_warmup(1)->mutable_inputs())["nope"] = c.model_warmup(1).inputs().at("INPUT__0");
       },
       "config.pbtxt: model_warmup[1].inputs[\"nope\"] names no input of the model (hint: key warm-up inputs by the "
       "input names)"},
      {[](auto& c) { (*c.mutable_model_warmup(1)->mutable_inputs())["INPUT__0"].set_dims(1, -1); },
       "config.pbtxt: model_warmup[1].inputs[\"INPUT__0\"].dims[1] is -1 (hint: warm-up data needs fixed sizes)"},
      {[](auto& c) { (*c.mutable_model_warmup(1)->mutable_inputs())["INPUT__0"].clear_input_data_type(); },
       "config.pbtxt: model_warmup[1].inputs[\"INPUT__0\"] has no data (hint: set zero_data: true, random_data: true "
       "or "
       "input_data_file)"},
  };
  validate_model_config(rich_config(), "rich");  // the base case is valid
  for (const auto& [mutate, expected] : cases) {
    triton::ModelConfig c = rich_config();
    mutate(c);
    const Error e = error_of([&] { validate_model_config(c, "rich"); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << expected;
    EXPECT_EQ(e.one_line(), expected);
    // The same check runs when a file is parsed.
    EXPECT_EQ(
        error_of([&] { parse_model_config(print_model_config(c), "config.pbtxt", expecting("rich")); }).one_line(),
        expected);
  }
}

TEST(ModelConfig, JsonAndDatatypes) {
  const nlohmann::json j =
      nlohmann::json::parse(model_config_to_json(make_model_config("fashion_cnn", fashion_contract())));
  EXPECT_EQ(j["max_batch_size"], 64);
  EXPECT_EQ(j["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(j["input"][0]["dims"], nlohmann::json::array({"1", "28", "28"}));  // int64 as strings, as protobuf's JSON
  EXPECT_EQ(j["dynamic_batching"]["max_queue_delay_microseconds"], "100");
  EXPECT_EQ(j["instance_group"][0]["kind"], "KIND_CPU");
  EXPECT_EQ(kserve_datatype(triton::TYPE_FP32), "FP32");
  EXPECT_EQ(kserve_datatype(triton::TYPE_STRING), "BYTES");
  EXPECT_EQ(kserve_datatype(triton::TYPE_BF16), "BF16");
}

// ---------------------------------------------------------------------------------------------
// The repository

TEST(ModelRepository, WriteThenReadBack) {
  const fs::path dir = testing::temp_dir("repo_roundtrip");
  const fs::path model = make_model_file(dir, "model.pt", std::string(1000, 'x'));
  const fs::path repo = dir / "repo";
  const RepositoryWriteResult r = write_model_repository(repo, "fashion_cnn", 1, model, fashion_contract());
  EXPECT_EQ(r.model_dir, repo / "fashion_cnn");
  EXPECT_EQ(r.version_dir, repo / "fashion_cnn" / "1");
  EXPECT_FALSE(r.replaced_version);
  ASSERT_EQ(r.files.size(), 4U);
  EXPECT_EQ(r.files[0].path, repo / "fashion_cnn" / "1" / "model.pt");
  EXPECT_EQ(r.files[0].bytes, 1000U);
  std::uintmax_t total = 0;
  for (const auto& f : r.files) {
    EXPECT_EQ(f.bytes, fs::file_size(f.path)) << f.path;
    total += f.bytes;
  }
  EXPECT_EQ(r.total_bytes(), total);
  EXPECT_EQ(contents(repo / "fashion_cnn" / "labels.txt"),
            "T-shirt/top\nTrouser\nPullover\nDress\nCoat\nSandal\nShirt\nSneaker\nBag\nAnkle boot\n");
  EXPECT_TRUE(hidden_entries(dir).empty());

  const RepositoryEntry e = read_model_repository_entry(repo / "fashion_cnn");
  EXPECT_EQ(e.name, "fashion_cnn");
  EXPECT_TRUE(MessageDifferencer::Equals(e.config, r.config));
  EXPECT_TRUE(MessageDifferencer::Equals(e.config, make_model_config("fashion_cnn", fashion_contract())));
  ASSERT_TRUE(e.contract.has_value());
  EXPECT_EQ(e.contract->name, "fashion_cnn");  // the contract takes the model's name
  EXPECT_EQ(e.contract->labels, fashion_contract().labels);
  EXPECT_EQ(e.contract->mean, fashion_contract().mean);
  EXPECT_EQ(e.labels.at("OUTPUT__0"), fashion_contract().labels);
  EXPECT_EQ(e.versions, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(e.served_versions(), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(e.model_path(1), repo / "fashion_cnn" / "1" / "model.pt");
  EXPECT_EQ(list_repository_models(repo), (std::vector<std::string>{"fashion_cnn"}));
  // A trailing slash names the same directory.
  EXPECT_EQ(read_model_repository_entry(repo.string() + "/fashion_cnn/").name, "fashion_cnn");

  // Without labels in the contract the label file holds the class indices.
  const RepositoryWriteResult f = write_model_repository(repo, "features", 3, model, features_contract());
  EXPECT_EQ(contents(f.model_dir / "labels.txt"), "0\n1\n2\n");
  EXPECT_EQ(list_versions(f.model_dir), (std::vector<std::int64_t>{3}));
}

TEST(ModelRepository, ReplacingAVersionIsAtomicAndLeavesTheRestAlone) {
  const fs::path dir = testing::temp_dir("repo_versions");
  const fs::path repo = dir / "repo";
  const fs::path v1 = make_model_file(dir, "a.pt", "version one");
  const fs::path v2 = make_model_file(dir, "b.pt", "version two");
  const fs::path v2b = make_model_file(dir, "c.pt", "version two, retrained");
  write_model_repository(repo, "other", 1, v1, features_contract());
  write_model_repository(repo, "fashion_cnn", 1, v1, fashion_contract());
  write_model_repository(repo, "fashion_cnn", 2, v2, fashion_contract());
  fs::create_directories(repo / "fashion_cnn" / "notes");  // not a version: left alone and not listed
  write_file_atomic(repo / "fashion_cnn" / "notes" / "readme", "mine");
  const auto other_before = snapshot(repo / "other");
  EXPECT_EQ(list_versions(repo / "fashion_cnn"), (std::vector<std::int64_t>{1, 2}));

  const RepositoryWriteResult r = write_model_repository(repo, "fashion_cnn", 2, v2b, fashion_contract());
  EXPECT_TRUE(r.replaced_version);
  EXPECT_EQ(contents(repo / "fashion_cnn" / "1" / "model.pt"), "version one");
  EXPECT_EQ(contents(repo / "fashion_cnn" / "2" / "model.pt"), "version two, retrained");
  EXPECT_EQ(contents(repo / "fashion_cnn" / "notes" / "readme"), "mine");
  EXPECT_EQ(snapshot(repo / "other"), other_before);
  EXPECT_TRUE(hidden_entries(dir).empty()) << hidden_entries(dir)[0];

  // A write that fails half-way (a full disk) leaves the old version and everything else intact.
  const auto all_before = snapshot(repo);
  const fs::path v2c = make_model_file(dir, "d.pt", std::string(4096, 'z'));
  // Writes 1-3 stage labels.txt, contract.json, config.pbtxt; write 4 is the version's model.pt.
  for (int nth = 1; nth <= 4; ++nth) {
    SCOPED_TRACE("failing write " + std::to_string(nth));
    inject_write_failure_for_testing(nth);
    const Error e = error_of([&] { write_model_repository(repo, "fashion_cnn", 2, v2c, fashion_contract()); });
    inject_write_failure_for_testing(0);
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_EQ(snapshot(repo), all_before);
    EXPECT_TRUE(hidden_entries(dir).empty());
  }
  // The same for a new model: nothing of it appears.
  inject_write_failure_for_testing(2);
  EXPECT_EQ(error_of([&] { write_model_repository(repo, "new_model", 1, v1, fashion_contract()); }).code(),
            ErrorCode::kResourceExhausted);
  inject_write_failure_for_testing(0);
  EXPECT_FALSE(fs::exists(repo / "new_model"));
  EXPECT_EQ(snapshot(repo), all_before);
  EXPECT_TRUE(hidden_entries(dir).empty());

  // Version policies over the folders present.
  const RepositoryEntry entry = read_model_repository_entry(repo / "fashion_cnn");
  EXPECT_EQ(entry.versions, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(entry.served_versions(), (std::vector<std::int64_t>{2}));
  triton::ModelConfig c = entry.config;
  c.mutable_version_policy()->mutable_latest()->set_num_versions(5);
  EXPECT_EQ(select_versions(c, {3, 1, 2}), (std::vector<std::int64_t>{1, 2, 3}));
  c.mutable_version_policy()->mutable_latest()->set_num_versions(2);
  EXPECT_EQ(select_versions(c, {3, 1, 2, 10}), (std::vector<std::int64_t>{3, 10}));
  c.mutable_version_policy()->mutable_all();
  EXPECT_EQ(select_versions(c, {2, 1}), (std::vector<std::int64_t>{1, 2}));
  c.mutable_version_policy()->mutable_specific()->add_versions(2);
  c.mutable_version_policy()->mutable_specific()->add_versions(7);
  EXPECT_EQ(select_versions(c, {1, 2, 3}), (std::vector<std::int64_t>{2}));
  c.clear_version_policy();
  EXPECT_EQ(select_versions(c, {1, 4, 2}), (std::vector<std::int64_t>{4}));
  EXPECT_TRUE(select_versions(c, {}).empty());
}

TEST(ModelRepository, ErrorsAreOneLineWithAHint) {
  const fs::path dir = testing::temp_dir("repo_errors");
  const fs::path repo = dir / "repo";
  const fs::path model = make_model_file(dir, "m.pt", "bytes");
  for (const std::string& name :
       std::vector<std::string>{"", ".hidden", "-x", "a/b", "..", "a b", "caf\xc3\xa9", std::string(129, 'a')}) {
    const Error e = error_of([&] { write_model_repository(repo, name, 1, model, fashion_contract()); });
    EXPECT_EQ(e.one_line(),
              "model name \"" + name +
                  "\" is not a valid model directory name (hint: use letters, digits, '_', '-' and '.', starting "
                  "with a letter, digit or '_' (e.g. fashion_cnn))");
  }
  EXPECT_NO_THROW(check_model_name("resnet18_v1.2-int8"));
  EXPECT_EQ(error_of([&] { write_model_repository(repo, "m", 0, model, fashion_contract()); }).one_line(),
            "model version 0 is not a version number (hint: versions are numbered from 1 (--version 1))");
  const Error missing = error_of([&] { write_model_repository(repo, "m", 1, dir / "nope.pt", fashion_contract()); });
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound);
  EXPECT_EQ(missing.one_line(),
            "no model file " + (dir / "nope.pt").string() +
                " (hint: export the TorchScript file first (glassbox export --format torchscript))");
  EXPECT_EQ(error_of([&] { write_model_repository(model, "m", 1, model, fashion_contract()); }).one_line(),
            "model repository " + model.string() + " is a file (hint: choose a directory for --out)");
  nn::ModelContract bad = fashion_contract();
  bad.labels.pop_back();
  EXPECT_EQ(error_of([&] { write_model_repository(repo, "m", 1, model, bad); }).code(), ErrorCode::kInvalidArgument);
  nn::ModelContract newline = fashion_contract();
  newline.labels[3] = "Dre\nss";
  EXPECT_EQ(error_of([&] { write_model_repository(repo, "m", 1, model, newline); }).one_line(),
            "label 3 contains a line break; a label file holds one name per line (hint: remove line breaks from class "
            "names)");
  EXPECT_FALSE(fs::exists(repo / "m"));  // nothing was written by a failed call

  // Another version with another signature would be served by the new config: refused.
  write_model_repository(repo, "m", 1, model, fashion_contract());
  nn::ModelContract wider = fashion_contract();
  wider.input_shape = {1, 32, 32};
  const Error sig = error_of([&] { write_model_repository(repo, "m", 2, model, wider); });
  EXPECT_EQ(sig.code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(sig.one_line(),
            "model m already has versions 1 with another input/output signature or preprocessing (platform, "
            "max_batch_size, input, output, glassbox.* parameters) in " +
                (repo / "m" / "config.pbtxt").string() +
                "; one config.pbtxt serves every version (hint: export under another --name, or remove the old "
                "versions first)");
  EXPECT_FALSE(fs::exists(repo / "m" / "2"));
  // Other preprocessing or other class names would silently change what version 1's clients feed.
  nn::ModelContract renormalised = fashion_contract();
  renormalised.mean = {0.5};
  EXPECT_EQ(error_of([&] { write_model_repository(repo, "m", 2, model, renormalised); }).code(),
            ErrorCode::kFailedPrecondition);
  nn::ModelContract relabelled = fashion_contract();
  relabelled.labels[0] = "Top";
  EXPECT_NE(
      error_of([&] { write_model_repository(repo, "m", 2, model, relabelled); }).message().find("other class names"),
      std::string::npos);
  EXPECT_FALSE(fs::exists(repo / "m" / "2"));
  // Replacing the only version with a new signature is fine, as is a new version with the same one.
  EXPECT_NO_THROW(write_model_repository(repo, "m", 1, model, wider));
  EXPECT_NO_THROW(write_model_repository(repo, "m", 2, model, wider));
  write_file_atomic(repo / "m" / "config.pbtxt", "garbage {");
  EXPECT_EQ(error_of([&] { write_model_repository(repo, "m", 3, model, wider); }).code(),
            ErrorCode::kFailedPrecondition);

  // Reading: the directory name must match, label files must exist.
  fs::create_directories(repo / "renamed");
  write_model_config(repo / "renamed" / "config.pbtxt", make_model_config("fashion_cnn", fashion_contract()));
  EXPECT_EQ(
      error_of([&] { read_model_repository_entry(repo / "renamed"); }).one_line(),
      (repo / "renamed" / "config.pbtxt").string() +
          ": name is \"fashion_cnn\" but the model directory is \"renamed\" (hint: set name: \"renamed\" or rename the "
          "directory)");
  fs::create_directories(repo / "nolabels");
  write_model_config(repo / "nolabels" / "config.pbtxt", make_model_config("nolabels", fashion_contract()));
  EXPECT_EQ(
      error_of([&] { read_model_repository_entry(repo / "nolabels"); }).one_line(),
      "label file " + (repo / "nolabels" / "labels.txt").string() +
          " named by output OUTPUT__0's label_filename is missing (hint: write one class name per line, or remove "
          "label_filename from config.pbtxt)");
  EXPECT_EQ(error_of([&] { read_model_repository_entry(repo / "absent"); }).code(), ErrorCode::kNotFound);
  EXPECT_EQ(parse_labels("a\r\nb\n\nc"), (std::vector<std::string>{"a", "b", "", "c"}));
}

// ---------------------------------------------------------------------------------------------
// Reference: Triton's own message definition (PyPI tritonclient), parsed by Python protobuf

nlohmann::json run_reference(const std::vector<std::string>& args) {
  return nlohmann::json::parse(testing::run_python("tests/reference/triton_config_ref.py", args));
}

TEST(TritonConfigReference, FieldNamesNumbersAndTypesAreTritons) {
  const fs::path dir = testing::temp_dir("triton_descriptor");
  google::protobuf::FileDescriptorProto fd;
  triton::ModelConfig::descriptor()->file()->CopyTo(&fd);
  write_file_atomic(dir / "model_config.desc", fd.SerializeAsString());
  const nlohmann::json r = run_reference({"descriptor", (dir / "model_config.desc").string()});
  EXPECT_EQ(r["mismatches"], nlohmann::json::array()) << r.dump(2);
  EXPECT_GE(r["compared"].get<int>(), 90) << "every field and enum value of the message is compared";
}

TEST(TritonConfigReference, ConfigsGlassboxWritesParseWithTritonsMessage) {
  const fs::path dir = testing::temp_dir("triton_parse");
  std::vector<triton::ModelConfig> configs = {make_model_config("fashion_cnn", fashion_contract()), rich_config()};
  ModelConfigOptions gpu;
  gpu.instance_kind = InstanceKind::kGpu;
  gpu.instance_count = 2;
  gpu.gpus = {0, 1};
  gpu.max_batch_size = 128;
  gpu.preferred_batch_sizes = {16, 128};
  configs.push_back(make_model_config("features_gpu", features_contract(), gpu));
  triton::ModelConfig all = rich_config();
  all.set_name("all_versions");
  all.mutable_version_policy()->mutable_all();
  all.mutable_dynamic_batching()->clear_priority_queue_policy();
  configs.push_back(all);
  ModelConfigOptions unbatched;
  unbatched.max_batch_size = 0;
  unbatched.dynamic_batching = false;
  triton::ModelConfig nobatch = make_model_config("nobatch", features_contract(), unbatched);
  nobatch.mutable_version_policy()->mutable_latest()->set_num_versions(3);
  configs.push_back(nobatch);

  std::vector<std::string> paths;
  for (const auto& c : configs) {
    const fs::path p = dir / c.name() / "config.pbtxt";
    write_model_config(p, c);
    paths.push_back(p.string());
  }
  // A file Triton's message must refuse: the reference is strict.
  write_file_atomic(dir / "bad" / "config.pbtxt", "name: \"bad\"\nmax_batch_sizes: 4\n");
  paths.push_back((dir / "bad" / "config.pbtxt").string());

  std::vector<std::string> args = {"parse"};
  args.insert(args.end(), paths.begin(), paths.end());
  const nlohmann::json ref = run_reference(args);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    SCOPED_TRACE(paths[i]);
    const triton::ModelConfig back = read_model_config(paths[i], configs[i].name());
    EXPECT_TRUE(MessageDifferencer::Equals(back, configs[i])) << "glassbox does not read back what it wrote";
    ASSERT_TRUE(ref[paths[i]].contains("json")) << ref[paths[i]].dump();
    const nlohmann::json theirs = nlohmann::json::parse(ref[paths[i]]["json"].get<std::string>());
    const nlohmann::json ours = nlohmann::json::parse(model_config_to_json(back));
    EXPECT_EQ(ours, theirs) << "glassbox: " << ours.dump(1) << "\ntritonclient: " << theirs.dump(1);
    EXPECT_GT(theirs.size(), 5U);
  }
  EXPECT_NE(ref[paths.back()].value("error", "").find("max_batch_sizes"), std::string::npos)
      << ref[paths.back()].dump();
}

TEST(TritonConfigReference, ConfigsWrittenWithTritonsMessageReadIdentically) {
  const fs::path dir = testing::temp_dir("triton_write");
  const nlohmann::json ref = run_reference({"write", dir.string()});
  ASSERT_EQ(ref.size(), 2U) << ref.dump();
  std::vector<std::string> reprinted = {"parse"};
  for (const auto& [name, json] : ref.items()) {
    SCOPED_TRACE(name);
    const triton::ModelConfig c = read_model_config(dir / name / "config.pbtxt", name);
    EXPECT_EQ(nlohmann::json::parse(model_config_to_json(c)), nlohmann::json::parse(json.get<std::string>()));
    // And what glassbox prints from it, Triton's message reads identically again.
    const fs::path again = dir / "again" / name / "config.pbtxt";
    write_model_config(again, c);
    reprinted.push_back(again.string());
  }
  const nlohmann::json back = run_reference(reprinted);
  for (std::size_t i = 1; i < reprinted.size(); ++i) {
    const std::string name = fs::path(reprinted[i]).parent_path().filename().string();
    ASSERT_TRUE(back[reprinted[i]].contains("json")) << back[reprinted[i]].dump();
    EXPECT_EQ(nlohmann::json::parse(back[reprinted[i]]["json"].get<std::string>()),
              nlohmann::json::parse(ref[name].get<std::string>()));
  }
}

}  // namespace
}  // namespace glassbox::exporter
