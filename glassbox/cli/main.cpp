// glassbox — train, diagnose, evaluate, explain, export, serve and monitor neural networks.
//
// Exit status: 0 success, 1 a runtime failure, 2 a user error (bad flag, config, data, checkpoint;
// CUDA asked for but absent), 130 interrupted (the work done so far is saved).
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/cli/commands.h"
#include "glassbox/core/version.h"

namespace {

std::string version_text() {
  std::string cuda = "CPU only";
  if (torch::cuda::is_available()) {
    cuda = fmt::format("CUDA {} device(s)", torch::cuda::device_count());
  } else if (at::hasCUDA()) {
    cuda = "CUDA build, no device";
  }
  return fmt::format("glassbox {} (LibTorch {}, {})", glassbox::kGlassboxVersion, glassbox::torch_version(), cuda);
}

// The subcommand being parsed when the error came (the deepest one that was named).
CLI::App* active(CLI::App& app) {
  CLI::App* at = &app;
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (CLI::App* sub : at->get_subcommands()) {
      at = sub;
      deeper = true;
      break;
    }
  }
  return at;
}

std::string command_path(CLI::App* a) {
  std::string path;
  for (CLI::App* p = a; p != nullptr; p = p->get_parent()) path = p->get_name() + (path.empty() ? "" : " ") + path;
  return path;
}

// "unknown command 'tran' (did you mean 'train'?)", "unknown option '--epoch' for 'glassbox train'
// (did you mean '--set'?)".
std::string parse_error_text(CLI::App& app, const CLI::ParseError& e, const std::string& binary) {
  CLI::App* at = active(app);
  const std::string where = command_path(at);
  // CLI11 names the unexpected words in its message: "... not expected: WORD [WORD...]".
  std::string word;
  const std::string what = e.what();
  const auto colon = what.rfind("expected: ");
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::ExtrasError) && colon != std::string::npos) {
    word = what.substr(colon + 10);
    word = word.substr(0, word.find(' '));
  } else if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::RequiredError) && !at->get_subcommands({}).empty() &&
             at->get_subcommands().empty()) {
    // "glassbox lab rn x": CLI11 reports the missing subcommand before the words it could not
    // place, which it keeps in remaining(); the first of them is the mistyped command.
    for (const std::string& w : at->remaining()) {
      if (w.rfind("-", 0) != 0) {
        word = w;
        break;
      }
    }
  }
  if (!word.empty()) {
    std::vector<std::string> candidates;
    std::string kind;
    if (word.rfind("-", 0) == 0) {
      kind = "option";
      for (const CLI::Option* o : at->get_options())
        for (const auto& n : o->get_lnames()) candidates.push_back("--" + n);
    } else if (!at->get_subcommands({}).empty() && at->get_subcommands().empty()) {
      kind = "command";
      for (const CLI::App* s : at->get_subcommands({})) candidates.push_back(s->get_name());
    }
    if (!kind.empty()) {
      const std::string near = glassbox::closest_match(word, candidates);
      return fmt::format("unknown {} '{}' for '{}'{} (hint: run '{} --help')", kind, word, where,
                         near.empty() ? "" : " (did you mean '" + near + "'?)",
                         where == app.get_name() ? binary : binary + where.substr(app.get_name().size()));
    }
  }
  return fmt::format("{} (hint: run '{}{} --help')", e.what(), binary,
                     where == app.get_name() ? "" : where.substr(app.get_name().size()));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"glassbox: deep learning as a glass box — every step of a model's life can be looked into.\n",
               "glassbox"};
  app.set_version_flag("--version", version_text(), "print glassbox's, LibTorch's and CUDA's versions");
  app.require_subcommand(0, 1);
  app.footer(
      "Examples:\n"
      "  glassbox quickstart                          train an MLP on Fashion-MNIST and test it\n"
      "  glassbox train configs/cnn.toml --set trainer.max_epochs=3\n"
      "  glassbox train --resume runs/cnn/checkpoints/last.ckpt\n"
      "  glassbox eval --checkpoint runs/quickstart/checkpoints/last.ckpt\n"
      "  glassbox predict new.npy --checkpoint runs/quickstart/checkpoints/last.ckpt\n"
      "  glassbox bench train --json\n"
      "  glassbox doctor configs/quickstart.toml     diagnose a training setup\n"
      "  glassbox lab list                            reproducible broken setups\n"
      "  glassbox data write-images configs/cnn.toml --out fashion-png   an image folder to train on\n"
      "  glassbox export --checkpoint runs/quickstart/checkpoints/last.ckpt --format all\n"
      "  glassbox serve --model-repository runs/quickstart/export/repository\n"
      "  glassbox monitor rules --model-repository runs/quickstart/export/repository   Prometheus alerts\n"
      "Exit status: 0 ok, 1 runtime failure, 2 bad input, 130 interrupted.\n"
      "Run 'glassbox COMMAND --help' for a command's options.");
  // Every option shows its default in --help (subcommands inherit this from the app).
  app.option_defaults()->always_capture_default();
  glassbox::cli::add_quickstart(app);
  glassbox::cli::add_train(app);
  glassbox::cli::add_bench(app);
  glassbox::cli::add_doctor(app);
  glassbox::cli::add_lab(app);
  glassbox::cli::add_eval(app);
  glassbox::cli::add_explain(app);
  glassbox::cli::add_report(app);
  glassbox::cli::add_export(app);
  glassbox::cli::add_serve(app);
  glassbox::cli::add_predict(app);
  glassbox::cli::add_data(app);
  glassbox::cli::add_tune(app);
  glassbox::cli::add_monitor(app);
  const std::string binary = "glassbox";
  if (argc <= 1) {
    std::cout << app.help();
    return 0;
  }
  glassbox::cli::raw_args().assign(argv, argv + argc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "error: " << parse_error_text(app, e, binary) << "\n";
    return 2;
  } catch (const glassbox::Error& e) {
    std::cerr << "\nerror: " << e.one_line() << "\n";
    return glassbox::exit_code_for(e.code());
  } catch (const c10::Error& e) {
    std::cerr << "\nerror: LibTorch: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "\nerror: " << e.what() << "\n";
    return 1;
  }
  return glassbox::cli::exit_code();
}
