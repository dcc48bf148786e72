// glassbox — train, diagnose, evaluate, explain, export, serve and monitor neural networks.
#include <iostream>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"glassbox: deep learning as a glass box — every step of a model's life can be looked into.\n"};
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  glassbox quickstart                          train an MLP on Fashion-MNIST and test it\n"
      "  glassbox train configs/cnn.toml --set trainer.max_epochs=3\n"
      "  glassbox train configs/cnn.toml --resume runs/cnn/checkpoints/last.ckpt\n"
      "  glassbox bench train --json\n"
      "  glassbox doctor configs/quickstart.toml     diagnose a training setup\n"
      "  glassbox lab list                            reproducible broken setups\n"
      "  glassbox export --checkpoint runs/quickstart/checkpoints/last.ckpt --format all\n"
      "  glassbox serve --model-repository runs/quickstart/export/repository\n"
      "Run 'glassbox COMMAND --help' for a command's options.");
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "error: " << e.what() << " (hint: run '" << argv[0] << " --help')\n";
    return 2;
  } catch (const glassbox::Error& e) {
    std::cerr << "\nerror: " << e.one_line() << "\n";
    return glassbox::is_user_error(e.code()) ? 2 : 1;
  } catch (const c10::Error& e) {
    std::cerr << "\nerror: LibTorch: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "\nerror: " << e.what() << "\n";
    return 1;
  }
  return glassbox::cli::exit_code();
}
