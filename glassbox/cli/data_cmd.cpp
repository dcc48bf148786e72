// glassbox data inspect | preview | write-images | pack | synth: flags -> one app:: call -> print.
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "glassbox/app/data.h"
#include "glassbox/cli/commands.h"

namespace glassbox::cli {

void add_data(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("data", "Look at a data set, or write it as an image folder or as WebDataset tar shards");
  cmd->require_subcommand(1);

  auto ir = std::make_shared<app::InspectRequest>();
  auto iconfig = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* inspect = cmd->add_subcommand(
      "inspect", "Class counts, image sizes and channels, mean/std, files that do not decode, identical files");
  inspect->add_option("config", *iconfig, "training config whose [data] section is read")->required();
  inspect->add_option("--set", ir->overrides, "override a key of the config (repeatable)");
  inspect->add_flag("--json", *json, "print the report as JSON");
  inspect->footer(
      "Reads every file once (in parallel). The training mean/std are what data.mean / data.std take.\n"
      "Examples:\n"
      "  glassbox data inspect configs/cnn.toml\n"
      "  glassbox data inspect my.toml --set data.root=/data/parts --json");
  inspect->callback([ir, iconfig, json] {
    ir->config = *iconfig;
    const nlohmann::json j = app::inspect_data(*ir);
    std::cout << (*json ? j.dump(2) + "\n" : app::format_inspection(j));
  });

  auto pr = std::make_shared<app::PreviewRequest>();
  auto pconfig = std::make_shared<std::string>();
  auto pout = std::make_shared<std::string>();
  CLI::App* preview =
      cmd->add_subcommand("preview", "Augmented training images in a grid (PNG): each row one image, eval view first");
  preview->add_option("config", *pconfig, "training config (format = \"imagefolder\")")->required();
  preview->add_option("--out", *pout, "PNG file to write")->required();
  preview->add_option("--set", pr->overrides, "override a key of the config (repeatable)");
  preview->add_option("--samples", pr->samples, "rows: training images shown")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  preview->add_option("--variants", pr->variants, "augmented draws per image")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  preview->add_option("--seed", pr->seed, "which training images are picked")->capture_default_str();
  preview->footer(
      "The draws are those of epochs 0, 1, ... of a training run with the config's data.loader.seed.\n"
      "Example:\n"
      "  glassbox data preview configs/leaves.toml --out grid.png --samples 4 --variants 8");
  preview->callback([pr, pconfig, pout] {
    pr->config = *pconfig;
    pr->out = *pout;
    const app::PreviewOutcome o = app::preview_augmentation(*pr);
    std::cout << fmt::format("{} images x {} views ({}x{} pixels) -> {}\n", o.rows, o.columns, o.width, o.height,
                             o.out.string());
  });

  auto r = std::make_shared<app::WriteImagesRequest>();
  auto config = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* write = cmd->add_subcommand("write-images", "Write the images of a config's data set as an image folder");
  write->add_option("config", *config, "training config whose [data] section is read")->required();
  write->add_option("--out", *out, "the folder to create (must not exist)")->required();
  write->add_option("--set", r->overrides, "override a key of the config (repeatable)");
  write->add_option("--format", r->image_format, "png | jpg")
      ->check(CLI::IsMember({"png", "jpg"}))
      ->capture_default_str();
  write->add_option("--jpeg-quality", r->jpeg_quality, "JPEG quality 1-100")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  write->add_option("--limit", r->limit, "at most N images per split, the first ones (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  write->add_flag("--keep-val", r->keep_val, "write the validation split as val/ (default: it stays in train/)");
  write->footer(
      "Writes OUT/train/<class>/NNNNN.png and OUT/test/<class>/..., readable with data.format = \"imagefolder\".\n"
      "Examples:\n"
      "  glassbox data write-images configs/quickstart.toml --out /tmp/fashion-png\n"
      "  glassbox data write-images configs/cnn.toml --out /tmp/fashion-jpg --format jpg");
  write->callback([r, config, out] {
    r->config = *config;
    r->out = *out;
    const app::WriteImagesOutcome o = app::write_images(*r);
    std::string counts;
    for (const auto& [split, n] : o.images) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", split, n);
    std::cout << fmt::format("wrote {} ({} classes) -> {}\n", counts, o.classes.size(), o.out.string());
  });

  auto y = std::make_shared<app::SynthRequest>();
  auto ykind = std::make_shared<std::string>();
  auto yout = std::make_shared<std::string>();
  CLI::App* synth = cmd->add_subcommand("synth", "Write a seeded synthetic image data set (defects: metal parts)");
  synth->add_option("kind", *ykind, "defects: backlit metal parts, ok / crack / rust / thread_damage")
      ->required()
      ->check(CLI::IsMember({"defects"}));
  synth->add_option("--out", *yout, "the folder to create (must not exist)")->required();
  synth->add_option("--images", y->images, "images in all")->check(CLI::Range(4, 1000000))->capture_default_str();
  synth->add_option("--size", y->size, "pixels per side")->check(CLI::Range(16, 1024))->capture_default_str();
  synth->add_option("--seed", y->seed, "the same seed writes the same images")->capture_default_str();
  synth->add_option("--start", y->start, "first capture date (YYYY-MM-DD)")->capture_default_str();
  synth->add_option("--days", y->days, "capture dates spread over this many days")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  synth->footer(
      "Classes ok 32 %, crack 28 %, rust 22 %, thread_damage 18 %; metadata.csv dates each image (split_by = date).\n"
      "Example:\n"
      "  glassbox data synth defects --out parts --images 800\n"
      "  glassbox train configs/defects.toml --set data.root=parts");
  synth->callback([y, ykind, yout] {  // every bound variable lives as long as the command
    y->out = *yout;
    const app::SynthOutcome o = app::synth_defects(*y);
    std::string counts;
    for (const auto& [c, n] : o.per_class) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", c, n);
    std::cout << fmt::format("wrote {} ({}), captured {} .. {} -> {}\n", counts.empty() ? "nothing" : counts,
                             "metadata.csv", o.first_date, o.last_date, o.out.string());
  });

  auto k = std::make_shared<app::PackRequest>();
  auto ksource = std::make_shared<std::string>();
  CLI::App* pack = cmd->add_subcommand("pack", "Write images as WebDataset tar shards (data.format = \"webdataset\")");
  pack->add_option("source", *ksource, "an image folder, or a training config whose images are packed")->required();
  pack->add_option("--out", k->out, "shard names with one %d-style number, e.g. shards/train-%06d.tar")->required();
  pack->add_option("--split", k->split, "train | val | test: the split written (a plain class folder is all train)")
      ->check(CLI::IsMember({"train", "val", "test"}))
      ->capture_default_str();
  pack->add_option("--maxcount", k->maxcount, "samples per shard at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pack->add_option("--maxsize", k->maxsize, "bytes of image data per shard at most (a shard ends once it reaches it)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pack->add_option("--shuffle-seed", k->shuffle_seed, "seed of the sample order (-1: keep the folder's order)")
      ->capture_default_str();
  pack->add_option("--set", k->overrides, "override a key of the config (repeatable)");
  pack->footer(
      "Each sample is KEY.jpg (the image's bytes as stored) and KEY.cls (its class index); classes.txt goes\n"
      "beside the shards. Put {split} in --out to write every split. Shards are what Python's webdataset\n"
      "reads, and what data.train_shards takes. Nothing existing is overwritten.\n"
      "Examples:\n"
      "  glassbox data pack leaves --out shards/train-%06d.tar --maxcount 1000\n"
      "  glassbox data pack configs/leaves.toml --out shards/{split}-%06d.tar --maxsize 1e9");
  pack->callback([k, ksource] {
    k->source = *ksource;
    const app::PackOutcome o = app::pack_shards(*k);
    for (const auto& [split, shards] : o.shards)
      std::cout << fmt::format("{}: {} samples in {} shard(s): {}{}\n", split, o.samples.at(split), shards.size(),
                               shards.front(), shards.size() > 1 ? " ... " + shards.back() : "");
    if (!o.skipped.empty())
      std::cout << fmt::format("left out {} image(s) that do not decode, first: {}\n", o.skipped.size(),
                               o.skipped.front());
  });
}

}  // namespace glassbox::cli
