#include "bench/serve_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"

namespace glassbox::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const fs::path& log_path) : log_(log_path) {
  GB_CHECK(!argv.empty(), InvalidArgument, "no program to run", std::string("pass argv[0]"));
  what_ = argv[0] + (argv.size() > 1 ? " " + argv[1] : std::string());
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  GB_CHECK(log_fd >= 0, Unavailable, "cannot create " << log_path << ": " << std::strerror(errno),
           std::string("check that the temporary directory is writable"));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the benchmark, whatever kills it
    if (::getppid() != parent) ::_exit(127);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(args[0], args.data());
    static const char kMessage[] = "exec failed\n";
    [[maybe_unused]] const auto n = ::write(2, kMessage, sizeof kMessage - 1);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  GB_CHECK(pid > 0, Unavailable, "cannot start " << what_ << ": fork failed: " << std::strerror(fork_errno),
           std::string("free some memory or processes and retry"));
  pid_ = pid;
}

ChildProcess::~ChildProcess() {
  try {
    terminate(std::chrono::seconds(10));
  } catch (...) {
  }
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    pid_ = -1;
    return false;
  }
  return true;
}

int ChildProcess::terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  int status = 0;
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + grace;
  while (true) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return status;
}

std::string ChildProcess::log_tail(std::size_t bytes) const {
  std::ifstream in(log_, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > bytes) s = "..." + s.substr(s.size() - bytes);
  return s;
}

std::string ChildProcess::wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    std::ifstream in(log_);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(prefix, 0) == 0) return line;
    GB_CHECK(running(), Unavailable,
             what_ << " exited before printing '" << prefix << "'; its log ends: " << log_tail(),
             std::string("run the command by hand to see why it failed"));
    GB_CHECK(Clock::now() < deadline, Unavailable,
             what_ << " printed no '" << prefix << "' line within " << timeout.count() / 1000
                   << " s; its log ends: " << log_tail(),
             std::string("a slow model load? check the log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int parse_serving_port(const std::string& line) {
  // "serving: http://HOST:PORT ..." where HOST is a name, an IPv4 address or a bracketed IPv6 one.
  // Parsed by hand: GCC 12's std::regex trips -Wmaybe-uninitialized in the sanitizer build.
  const std::string scheme = "serving: http://";
  const auto at = line.find(scheme);
  std::size_t p = at == std::string::npos ? std::string::npos : at + scheme.size();
  if (p != std::string::npos && p < line.size() && line[p] == '[') {
    p = line.find(']', p);
    if (p != std::string::npos) ++p;
  } else if (p != std::string::npos) {
    p = line.find_first_of(" :/", p);
  }
  std::size_t digits = 0;
  if (p != std::string::npos && p < line.size() && line[p] == ':')
    while (p + 1 + digits < line.size() && digits < 6 && std::isdigit(static_cast<unsigned char>(line[p + 1 + digits])))
      ++digits;
  GB_CHECK(digits > 0, InvalidArgument, "no address in the line '" << line << "'",
           std::string("the server must print `serving: http://ADDR:PORT` when ready"));
  return std::stoi(line.substr(p + 1, digits));
}

HttpRequestSpec binary_infer_request(const InferSpec& spec, std::int64_t batch, std::uint64_t seed) {
  std::vector<std::int64_t> shape{batch};
  shape.insert(shape.end(), spec.dims.begin(), spec.dims.end());
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> values(static_cast<std::size_t>(n));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist;
  for (auto& v : values) v = dist(rng);
  const std::size_t bytes = values.size() * sizeof(float);
  nlohmann::json header{
      {"inputs",
       {{{"name", spec.input}, {"shape", shape}, {"datatype", "FP32"}, {"parameters", {{"binary_data_size", bytes}}}}}},
      {"outputs", {{{"name", spec.output}, {"parameters", {{"binary_data", true}}}}}}};
  const std::string text = header.dump();
  HttpRequestSpec r;
  r.method = "POST";
  r.target = "/v2/models/" + spec.model + "/infer";
  r.headers = {{"Content-Type", "application/octet-stream"},
               {"Inference-Header-Content-Length", std::to_string(text.size())}};
  r.body = text;
  r.body.append(reinterpret_cast<const char*>(values.data()), bytes);  // little-endian on x86/ARM
  return r;
}

void check_infer_reply(const HttpReply& reply, const InferSpec& spec, std::int64_t batch, const std::string& server) {
  GB_CHECK(reply.status == 200, Internal,
           server << " answered HTTP " << reply.status << " to an inference on '" << spec.model
                  << "': " << reply.body.substr(0, 300),
           std::string("the benchmark's request must be valid; check the server's log"));
  const std::string hl = reply.header("Inference-Header-Content-Length");
  GB_CHECK(!hl.empty(), Internal,
           server << " answered without Inference-Header-Content-Length (binary output asked for)",
           std::string("the server must honour outputs[].parameters.binary_data"));
  const std::size_t header_bytes = std::stoul(hl);
  const std::size_t expected = static_cast<std::size_t>(batch * spec.output_elements) * sizeof(float);
  GB_CHECK(header_bytes <= reply.body.size() && reply.body.size() - header_bytes == expected, Internal,
           server << " answered " << reply.body.size() << " bytes with a " << header_bytes << "-byte header; expected "
                  << expected << " bytes of output after it",
           std::string("compare the response with serving.md's binary tensor extension"));
  const auto j = nlohmann::json::parse(reply.body.substr(0, header_bytes));
  GB_CHECK(j.at("outputs").at(0).at("parameters").at("binary_data_size").get<std::size_t>() == expected, Internal,
           server << " reported another binary_data_size than " << expected, std::string("check the response header"));
}

ServerStats fetch_stats(int port, const std::string& model) {
  const HttpReply r = http_call("127.0.0.1", port, get_request("/v2/models/" + model + "/stats"));
  GB_CHECK(r.status == 200, Internal,
           "GET /v2/models/" << model << "/stats answered " << r.status << ": " << r.body.substr(0, 200),
           std::string("the server must implement the statistics extension"));
  const auto j = nlohmann::json::parse(r.body);
  ServerStats s;
  for (const auto& m : j.at("model_stats")) {
    const auto& i = m.at("inference_stats");
    auto count = [&](const char* k) { return i.at(k).at("count").get<std::uint64_t>(); };
    auto ns = [&](const char* k) { return i.at(k).at("ns").get<std::uint64_t>(); };
    s.success_count += count("success");
    s.success_ns += ns("success");
    s.queue_count += count("queue");
    s.queue_ns += ns("queue");
    s.compute_input_ns += ns("compute_input");
    s.compute_infer_ns += ns("compute_infer");
    s.compute_output_ns += ns("compute_output");
    s.execution_count += m.at("execution_count").get<std::uint64_t>();
    s.inference_count += m.at("inference_count").get<std::uint64_t>();
  }
  return s;
}

StatsDelta stats_delta(const ServerStats& a, const ServerStats& b) {
  StatsDelta d;
  d.requests = b.success_count - a.success_count;
  if (d.requests == 0) return d;
  const auto n = static_cast<double>(d.requests);
  d.request_us = static_cast<double>(b.success_ns - a.success_ns) / n / 1e3;
  const std::uint64_t queued = b.queue_count - a.queue_count;
  d.queue_us = queued ? static_cast<double>(b.queue_ns - a.queue_ns) / static_cast<double>(queued) / 1e3 : 0.0;
  d.compute_input_us = static_cast<double>(b.compute_input_ns - a.compute_input_ns) / n / 1e3;
  d.compute_infer_us = static_cast<double>(b.compute_infer_ns - a.compute_infer_ns) / n / 1e3;
  d.compute_output_us = static_cast<double>(b.compute_output_ns - a.compute_output_ns) / n / 1e3;
  d.compute_us = d.compute_input_us + d.compute_infer_us + d.compute_output_us;
  d.overhead_us = d.request_us - d.compute_us;
  const std::uint64_t executions = b.execution_count - a.execution_count;
  d.mean_batch =
      executions ? static_cast<double>(b.inference_count - a.inference_count) / static_cast<double>(executions) : 0.0;
  return d;
}

std::uint64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

namespace {

// utime + stime (clock ticks) and the parent of a process; false when it is gone.
bool read_stat(pid_t pid, std::uint64_t& ticks, pid_t& parent) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = s.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(s.substr(close + 2));
  std::string f;
  std::uint64_t utime = 0, stime = 0;
  // Fields after the command: state(3) ppid(4) pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime(14) stime(15).
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 4) parent = static_cast<pid_t>(std::stol(f));
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  ticks = utime + stime;
  return true;
}

}  // namespace

double process_cpu_seconds(pid_t pid) {
  // The process and its descendants alive now: a Python server's workers (LitServe's processes,
  // TorchServe's Java frontend and Python workers) work for it.
  std::map<pid_t, std::pair<std::uint64_t, pid_t>> all;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::uint64_t ticks = 0;
    pid_t parent = 0;
    if (read_stat(static_cast<pid_t>(std::stol(name)), ticks, parent)) all[std::stol(name)] = {ticks, parent};
  }
  std::uint64_t total = 0;
  for (const auto& [p, info] : all) {
    for (pid_t q = p; q > 1;) {
      if (q == pid) {
        total += info.first;
        break;
      }
      const auto it = all.find(q);
      if (it == all.end()) break;
      q = it->second.second;
    }
  }
  return static_cast<double>(total) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

bool wait_idle(pid_t pid, std::chrono::milliseconds timeout) {
  constexpr auto kInterval = std::chrono::milliseconds(200);
  const auto deadline = Clock::now() + timeout;
  double before = process_cpu_seconds(pid);
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(kInterval);
    const double now = process_cpu_seconds(pid);
    if (now - before < 0.05 * std::chrono::duration<double>(kInterval).count()) return true;
    before = now;
  }
  return false;
}

}  // namespace glassbox::bench
