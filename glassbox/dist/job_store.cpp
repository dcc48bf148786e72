// JobStore (job_store.h): the launcher's side of the store. Tested through the launcher by
// tests/ddp/ddp_test.py (faults, errors, multinode).
#include "glassbox/dist/job_store.h"

#include <cstdlib>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "glassbox/base/error.h"

namespace glassbox::dist {

std::string job_prefix(const WorldInfo& world) {
  std::string restart = "0";
  if (const char* r = std::getenv("TORCHELASTIC_RESTART_COUNT"); r != nullptr && *r != '\0') restart = r;
  return "glassbox/" + world.run_id + "/" + restart;
}

JobStore::~JobStore() = default;

std::unique_ptr<JobStore> JobStore::serve(int port, std::chrono::milliseconds timeout) {
  std::unique_ptr<JobStore> s(new JobStore());
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = true;
  o.waitWorkers = false;
  o.timeout = timeout;
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>("0.0.0.0", o);
    s->port_ = tcp->getPort();
    s->store_ = tcp;
  } catch (const std::exception& e) {
    std::string m = e.what();
    GB_THROW(Unavailable, "could not serve the rendezvous store on port " << port << ": " << m.substr(0, m.find('\n')),
             "the port is taken: pick another with --master-port");
  }
  return s;
}

std::unique_ptr<JobStore> JobStore::connect(const std::string& host, int port, std::chrono::milliseconds timeout) {
  std::unique_ptr<JobStore> s(new JobStore());
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = false;
  o.timeout = timeout;
  try {
    s->store_ = c10::make_intrusive<c10d::TCPStore>(host, o);
    s->port_ = port;
  } catch (const std::exception& e) {
    std::string m = e.what();
    GB_THROW(Unavailable,
             "could not reach the rendezvous store at " << host << ":" << port << ": " << m.substr(0, m.find('\n')),
             "start node 0 first (glassbox train ... --node-rank 0), and check --master-addr/--master-port");
  }
  return s;
}

bool JobStore::reachable() noexcept {
  try {
    store_->check({"glassbox/alive"});
    return true;
  } catch (...) {
    return false;
  }
}

void JobStore::report_failure(const std::string& prefix, int rank, const std::string& message) noexcept {
  try {
    const std::string key = prefix + "/failed/" + std::to_string(rank);
    if (!store_->check({key})) store_->set(key, std::vector<std::uint8_t>(message.begin(), message.end()));
  } catch (...) {
  }
}

std::optional<std::pair<int, std::string>> JobStore::failure(const std::string& prefix, int world_size) noexcept {
  try {
    for (int r = 0; r < world_size; ++r) {
      const std::string key = prefix + "/failed/" + std::to_string(r);
      if (store_->check({key})) {
        const auto v = store_->get(key);
        return std::make_pair(r, std::string(v.begin(), v.end()));
      }
    }
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace glassbox::dist
