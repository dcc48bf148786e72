#include "bench/serve_bench_models.h"

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "bench/source_dir.h"
#include "glassbox/base/error.h"
#include "glassbox/export/package.h"
#include "glassbox/export/repository.h"
#include "glassbox/monitor/profile.h"
#include "glassbox/nn/registry.h"
#include "glassbox/train/run_config.h"

namespace glassbox::bench {

namespace fs = std::filesystem;
namespace triton = exporter::triton;

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  GB_CHECK(::mkdtemp(pattern.data()) != nullptr, Unavailable, "cannot create a temporary directory " << pattern,
           std::string("check TMPDIR and free space"));
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {

InferSpec spec_of(const std::string& name, const triton::ModelConfig& c) {
  GB_CHECK(c.input_size() == 1 && c.output_size() >= 1, InvalidArgument,
           "model '" << name << "' has " << c.input_size() << " inputs; the serving benchmark drives one-input models",
           std::string("bench a model with a single FP32 input"));
  GB_CHECK(c.input(0).data_type() == triton::TYPE_FP32 && c.output(0).data_type() == triton::TYPE_FP32, InvalidArgument,
           "model '" << name << "' input or output is not FP32",
           std::string("bench a model with FP32 input and output"));
  InferSpec s;
  s.model = name;
  s.input = c.input(0).name();
  s.output = c.output(0).name();
  s.dims.assign(c.input(0).dims().begin(), c.input(0).dims().end());
  s.output_elements = 1;
  for (auto d : c.output(0).dims()) s.output_elements *= d;
  for (auto d : s.dims)
    GB_CHECK(d > 0, InvalidArgument, "model '" << name << "' has a variable input dimension",
             std::string("bench a model whose input dims are all fixed"));
  GB_CHECK(s.output_elements > 0, InvalidArgument, "model '" << name << "' has a variable output dimension",
           std::string("bench a model whose output dims are all fixed"));
  return s;
}

BenchModel from_entry(const exporter::RepositoryEntry& e, const std::string& architecture,
                      const std::string& description) {
  const auto versions = e.served_versions();
  GB_CHECK(!versions.empty(), NotFound,
           "model '" << e.name << "' in " << e.dir.parent_path() << " has no version to serve",
           std::string("export one: glassbox export --format repository"));
  GB_CHECK(e.config.platform() == exporter::kTorchScriptPlatform, InvalidArgument,
           "model '" << e.name << "' is a " << e.config.platform() << " model; the limit loads TorchScript",
           std::string("bench a pytorch_libtorch model"));
  BenchModel m;
  m.name = e.name;
  m.architecture = architecture;
  m.description = description;
  m.model_dir = e.dir;
  m.model_file = e.model_path(versions.back());
  m.config = e.config;
  m.spec = spec_of(e.name, e.config);
  return m;
}

}  // namespace

BenchModel zoo_model(const std::string& name, const ServeBenchOptions& o, const fs::path& work) {
  nn::ModelOptions mo;
  nn::ModelShape shape;
  nn::ModelContract contract;
  std::string description;
  if (name == "mlp") {
    mo = train::parse_run_config(o.quickstart_toml, "quickstart (built in)", {}).model;
    GB_CHECK(mo.name == "mlp", InvalidArgument,
             "the quickstart config's model is '" << mo.name << "', not the MLP this benchmark expects",
             std::string("bench it with --repository DIR --model NAME instead"));
    shape = {{1, 28, 28}, 10};
    contract.channel_order = nn::ChannelOrder::kGray;
    contract.scale = 1.0 / 255.0;
    std::string hidden;
    for (auto h : mo.mlp.hidden) hidden += std::to_string(h) + "-";
    description = fmt::format("quickstart MLP 784-{}10 ({}), 1x28x28", hidden, name_of(mo.mlp.norm));
  } else {
    mo.name = "resnet18";
    mo.resnet18.stem = nn::ResNetStem::kImagenet;
    shape = {o.resnet_input, 1000};
    contract.channel_order = o.resnet_input[0] == 3 ? nn::ChannelOrder::kRGB : nn::ChannelOrder::kNone;
    description = fmt::format("ResNet-18 (torchvision stem, 1000 classes), {}x{}x{}", o.resnet_input[0],
                              o.resnet_input[1], o.resnet_input[2]);
  }
  torch::manual_seed(0);
  std::unique_ptr<nn::Model> model = nn::make_model(mo, shape);
  contract.name = name;
  contract.architecture = name;
  contract.input_shape = shape.input_shape;
  contract.layout = nn::InputLayout::kNCHW;
  contract.num_classes = shape.num_classes;
  exporter::ExportRequest r;
  r.format = "repository";
  r.out = work / "export";
  r.name = name;
  r.verify = false;  // the benchmark's own probe checks the served output's size
  exporter::export_model(*model, contract, r);
  return from_entry(exporter::read_model_repository_entry(r.out / name), name, description);
}

BenchModel existing_model(const ServeBenchOptions& o, const fs::path&) {
  exporter::ParseConfigOptions po;
  po.allow_unknown_fields = true;
  const exporter::RepositoryEntry e = exporter::read_model_repository_entry(fs::path(o.repository) / o.model, po);
  const std::string architecture = e.contract ? e.contract->architecture : std::string("torchscript");
  std::string dims;
  for (auto d : e.config.input(0).dims()) dims += (dims.empty() ? "" : "x") + std::to_string(d);
  return from_entry(e, architecture, fmt::format("{} ({} from {}), {}", o.model, architecture, o.repository, dims));
}

void write_bench_profile(const BenchModel& m, const fs::path& version_dir, std::int64_t samples) {
  torch::jit::Module module = torch::jit::load(m.model_file.string());
  module.eval();
  c10::InferenceMode guard;
  monitor::InputSpec in;
  in.name = m.spec.input;
  in.kind = m.spec.dims.size() == 3 ? monitor::InputKind::kImage : monitor::InputKind::kTabular;
  in.shape = m.spec.dims;
  std::vector<std::string> classes;
  for (std::int64_t k = 0; k < m.spec.output_elements; ++k) classes.push_back(std::to_string(k));
  monitor::ReferenceBuilder builder(in, m.spec.output, /*logits=*/true, classes);
  torch::manual_seed(7);
  for (std::int64_t start = 0; start < samples; start += 64) {
    std::vector<std::int64_t> shape{std::min<std::int64_t>(64, samples - start)};
    shape.insert(shape.end(), m.spec.dims.begin(), m.spec.dims.end());
    const at::Tensor x = torch::randn(shape);
    const at::Tensor y = module.forward({x}).toTensor().to(torch::kDouble).contiguous();
    const at::Tensor xd = x.to(torch::kDouble).reshape({shape[0], -1}).contiguous();
    for (std::int64_t i = 0; i < shape[0]; ++i)
      builder.add({xd.data_ptr<double>() + i * xd.size(1), static_cast<std::size_t>(xd.size(1))},
                  {y.data_ptr<double>() + i * y.size(1), static_cast<std::size_t>(y.size(1))}, -1);
  }
  monitor::write_reference(version_dir, builder.build());
}

void write_bench_repository(const BenchModel& m, const fs::path& repo, const ServeBenchOptions& o, bool unbatched,
                            bool monitored) {
  auto write = [&](const std::string& name, bool batching) {
    const fs::path dir = repo / name;
    fs::create_directories(dir / "1");
    for (const auto& f : fs::directory_iterator(m.model_dir))
      if (f.is_regular_file() && f.path().filename() != exporter::kConfigFile)
        fs::copy_file(f.path(), dir / f.path().filename());
    const std::string file =
        m.config.default_model_filename().empty() ? exporter::kModelFile : m.config.default_model_filename();
    fs::copy_file(m.model_file, dir / "1" / file);
    triton::ModelConfig c = m.config;
    c.set_name(name);
    c.set_max_batch_size(o.max_batch_size);
    c.clear_version_policy();
    c.clear_instance_group();
    auto* g = c.add_instance_group();
    g->set_count(1);
    g->set_kind(triton::ModelInstanceGroup::KIND_CPU);
    c.clear_dynamic_batching();
    if (batching) {
      auto* b = c.mutable_dynamic_batching();
      for (auto p : o.preferred_batch_sizes)
        if (p <= o.max_batch_size) b->add_preferred_batch_size(p);
      b->set_max_queue_delay_microseconds(o.max_queue_delay_us);
    }
    exporter::write_model_config(dir / exporter::kConfigFile, c);
  };
  write(m.spec.model, true);
  if (unbatched) write(m.spec.model + "_unbatched", false);
  if (monitored) {
    write(m.spec.model + "_monitored", true);
    write_bench_profile(m, repo / (m.spec.model + "_monitored") / "1", 2000);
  }
}

ServeBenchOptions resolve_defaults(const ServeBenchOptions& in) {
  ServeBenchOptions o = in;
  o.validate();
  if (o.source_dir.empty()) o.source_dir = default_source_dir();
  if (o.python.empty()) o.python = o.source_dir + "/.venv/bin/python";
  if (o.server_binary.empty()) o.server_binary = fs::read_symlink("/proc/self/exe").string();
  // One core is left to the HTTP threads and the load generator: on a 2-core machine two OpenMP
  // threads stall whenever anything else runs (ResNet-18 3x64x64 batch 1: 26 ms at one thread,
  // 120-670 ms at two while other jobs ran).
  if (o.threads == 0) o.threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()) - 1);
  if (o.quickstart_toml.empty()) {
    std::ifstream in(o.source_dir + "/configs/quickstart.toml");
    o.quickstart_toml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return o;
}

Server start_server(const std::vector<std::string>& argv, const fs::path& log, std::chrono::seconds timeout) {
  Server s;
  s.process = std::make_unique<ChildProcess>(argv, log);
  s.banner = s.process->wait_for_line("serving: ", timeout);
  s.port = parse_serving_port(s.banner);
  return s;
}

Server start_glassbox(const fs::path& repo, const ServeBenchOptions& o, const fs::path& log) {
  std::vector<std::string> argv{o.server_binary,  "serve",     "--model-repository", repo.string(),
                                "--address",      "127.0.0.1", "--http-port",        "0",
                                "--metrics-port", "-1",        "--intra-op-threads", std::to_string(o.threads),
                                "--exit-timeout", "5",         "--grpc-port",        "0"};
  if (o.http_threads > 0) {
    argv.push_back("--threads");
    argv.push_back(std::to_string(o.http_threads));
  }
  Server s = start_server(argv, log, std::chrono::seconds(600));
  // "grpc: ADDR:PORT", printed before the serving line.
  const std::string g = s.process->wait_for_line("grpc: ", std::chrono::seconds(5));
  s.grpc_port = std::stoi(g.substr(g.rfind(':') + 1));
  return s;
}

Server start_python(const std::string& anchor, const BenchModel& m, const ServeBenchOptions& o, const fs::path& log) {
  return start_server(
      {o.python, o.source_dir + "/bench/" + anchor + "_server.py", "--model-file", m.model_file.string(), "--name",
       m.spec.model, "--threads", std::to_string(o.threads), "--host", "127.0.0.1", "--port", "0"},
      log, std::chrono::seconds(300));
}

nlohmann::json machine_description() {
  nlohmann::json m;
  m["cores"] = std::thread::hardware_concurrency();
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0) {
      m["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::ifstream mem("/proc/meminfo");
  for (std::string line; std::getline(mem, line);) {
    if (line.rfind("MemTotal:", 0) == 0) {
      m["memory_gib"] = std::round(std::stod(line.substr(9)) / (1024.0 * 1024.0) * 10) / 10;
      break;
    }
  }
  m["torch"] = TORCH_VERSION;
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  m["date"] = date;
  return m;
}

}  // namespace glassbox::bench
