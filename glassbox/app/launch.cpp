// The --nproc launcher (launch.h). Tested end to end through the CLI by tests/ddp/ddp_test.py
// (faults, Ctrl-C, errors, two nodes in network namespaces).
#include "glassbox/app/launch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <map>
#include <optional>
#include <ostream>
#include <thread>

#include <fmt/format.h>

#include "glassbox/app/run.h"
#include "glassbox/base/error.h"
#include "glassbox/dist/job_store.h"

namespace glassbox::app {

namespace {

volatile std::sig_atomic_t g_signal = 0;

void on_signal(int sig) { g_signal = sig; }

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return fmt::format("was killed by signal {} (SIG{})", sig, name ? name : "?");
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool done = false;
  int status = 0;
};

// fork + exec with the launcher's environment and the worker's variables on top (both built
// before fork: the child only calls async-signal-safe functions); the child dies with the
// launcher.
pid_t start_worker(const std::vector<std::string>& command, const std::vector<std::string>& env) {
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> all;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& mine : env) replaced = replaced || mine.compare(0, name.size() + 1, name + "=") == 0;
    if (!replaced) all.push_back(entry);
  }
  all.insert(all.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : all) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  GB_CHECK(pid >= 0, ResourceExhausted, "could not start a worker process: " << std::strerror(errno),
           "lower --nproc or free process slots");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // A process group of its own: a terminal's Ctrl-C reaches the launcher only, which passes it
    // on once (a second signal would end a worker at once, without its last checkpoint).
    ::setpgid(0, 0);
    if (::getppid() != parent) ::_exit(1);  // the launcher died before prctl
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

std::optional<dist::WorldInfo> data_parallel_world(const train::TrainerOptions& trainer) {
  std::optional<dist::WorldInfo> world = dist::WorldInfo::from_env();
  switch (trainer.strategy) {
    case train::Strategy::kSingle:
      GB_CHECK(!world || world->world_size == 1, InvalidArgument,
               "trainer.strategy = \"single\", but this process was launched as " << world->describe(),
               "set trainer.strategy = \"ddp\" (or \"auto\"), or launch one process");
      return std::nullopt;
    case train::Strategy::kAuto:
      if (!world || world->world_size == 1) return std::nullopt;
      return world;
    case train::Strategy::kDdp:
      if (world) return world;
      world = dist::WorldInfo{};  // one rank: the data-parallel path on its own
      world->master_port = 0;     // its store on a free port
      return world;
  }
  return std::nullopt;
}

void validate(const LaunchOptions& o) {
  GB_CHECK(o.nproc >= 1 && o.nproc <= 1024, InvalidArgument, "--nproc must be between 1 and 1024, got " << o.nproc,
           "use one worker per GPU, or a few per machine on CPU");
  GB_CHECK(o.nnodes >= 1 && o.nnodes <= 4096, InvalidArgument, "--nnodes must be >= 1, got " << o.nnodes,
           "use 1 for one machine");
  GB_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, InvalidArgument,
           "--node-rank " << o.node_rank << " is not below --nnodes " << o.nnodes, "nodes count from 0");
  GB_CHECK(o.master_port >= 0 && o.master_port <= 65535, InvalidArgument,
           "--master-port " << o.master_port << " is not a TCP port", "use a free port such as 29500");
  GB_CHECK(o.nnodes == 1 || o.master_port > 0, InvalidArgument,
           "a job of " << o.nnodes << " nodes needs a known --master-port", "pass --master-port 29500 on every node");
  GB_CHECK(!o.command.empty(), InvalidArgument, "no worker command", "pass the command to run");
}

int launch_workers(const LaunchOptions& o, std::ostream& err) {
  validate(o);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout * 1000));
  std::unique_ptr<dist::JobStore> store = o.node_rank == 0
                                              ? dist::JobStore::serve(o.master_port, timeout)
                                              : dist::JobStore::connect(o.master_addr, o.master_port, timeout);
  const int world = o.nproc * o.nnodes;
  dist::WorldInfo info;
  info.run_id = o.run_id;
  const std::string prefix = dist::job_prefix(info);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  g_signal = 0;

  std::vector<Worker> workers;
  for (int local = 0; local < o.nproc; ++local) {
    Worker w;
    w.rank = o.node_rank * o.nproc + local;
    std::vector<std::string> env = {
        "RANK=" + std::to_string(w.rank),
        "LOCAL_RANK=" + std::to_string(local),
        "WORLD_SIZE=" + std::to_string(world),
        "LOCAL_WORLD_SIZE=" + std::to_string(o.nproc),
        "GROUP_RANK=" + std::to_string(o.node_rank),
        "MASTER_ADDR=" + o.master_addr,
        "MASTER_PORT=" + std::to_string(store->port()),
        "TORCHELASTIC_RUN_ID=" + o.run_id,
        "TORCHELASTIC_RESTART_COUNT=0",
        "TORCHELASTIC_USE_AGENT_STORE=True",
    };
    // Like torchrun: the cores are shared by the workers unless the user said otherwise.
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
      env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1L, cores / o.nproc)));
    }
    w.pid = start_worker(o.command, env);
    workers.push_back(w);
  }

  std::optional<std::string> failure;  // the first failure, as printed
  int failure_status = 0;
  std::optional<std::chrono::steady_clock::time_point> ending;  // when the others were told to stop
  int signals_sent = 0;
  bool store_lost = false;  // node 0's store went away while workers here still ran
  bool all_ok = true;       // every local worker exited 0 or 130 (so far)
  auto last_store_check = std::chrono::steady_clock::now();
  const auto send_all = [&](int sig) {
    for (auto& w : workers)
      if (!w.done) ::kill(w.pid, sig);
  };
  for (;;) {
    // Reap.
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& w : workers) {
        if (w.pid != pid || w.done) continue;
        w.done = true;
        w.status = status;
        const bool ok = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 130);
        if (!ok) all_ok = false;
        // The first failure is the cause; workers this launcher stopped itself are not.
        if (!ok && !failure && signals_sent == 0) {
          failure = fmt::format("rank {} (pid {}) {}", w.rank, w.pid, describe_status(status));
          failure_status = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
          if (WIFSIGNALED(status)) store->report_failure(prefix, w.rank, "its process " + describe_status(status));
          ending = std::chrono::steady_clock::now();
        }
      }
    }
    bool all_done = true;
    for (const auto& w : workers) all_done = all_done && w.done;
    if (all_done) break;
    const auto now = std::chrono::steady_clock::now();
    if (g_signal != 0) {
      send_all(g_signal);  // Ctrl-C / SIGTERM: the workers stop after their step
      g_signal = 0;
    }
    if (!ending && now - last_store_check > std::chrono::seconds(1)) {
      last_store_check = now;
      // Another node's rank failed, or node 0's launcher (the store) is gone.
      if (auto f = store->failure(prefix, world)) {
        bool local = false;
        for (const auto& w : workers) local = local || w.rank == f->first;
        if (!local) {
          failure = fmt::format("rank {} on another node failed ({})", f->first, f->second);
          failure_status = 1;
          ending = now;
        }
      } else if (o.node_rank != 0 && !store->reachable()) {
        // Node 0's launcher is gone: after a normal end (its workers finished first) the local
        // workers finish too; otherwise they are stopped after the grace period.
        store_lost = true;
        ending = now;
      }
    }
    if (ending) {
      const double waited = std::chrono::duration<double>(now - *ending).count();
      if (signals_sent == 0 && waited > o.grace) {
        send_all(SIGTERM);
        signals_sent = 1;
      } else if (signals_sent == 1 && waited > o.grace + 5) {
        send_all(SIGKILL);
        signals_sent = 2;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (!failure && store_lost && !all_ok) {
    failure = "node 0's launcher (the rendezvous store) went away while this node's workers ran";
    failure_status = 1;
  }
  if (failure) {
    err << "error: " << *failure << "; the job stopped (hint: resume from the last checkpoint with glassbox train "
        << "--resume RUN/checkpoints/last.ckpt and the same launch flags)\n";
    return failure_status == 0 ? 1 : failure_status;
  }
  for (const auto& w : workers)
    if (WIFEXITED(w.status) && WEXITSTATUS(w.status) == 130) return 130;
  return 0;
}

}  // namespace glassbox::app
