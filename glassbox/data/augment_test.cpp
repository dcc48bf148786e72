// The augmentation framework: the per-sample random source, p, composition, and transform lists
// read from configs (unknown names and keys, defaults written out, inline lists).
#include "glassbox/data/augment.h"

#include <gtest/gtest.h>
#include <opencv2/core.hpp>

#include "glassbox/base/error.h"
#include "glassbox/data/image_folder.h"

namespace glassbox::data {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.one_line();
  }
  return "<no error>";
}

struct Steps {
  std::vector<TransformSpec> steps;
  void visit(FieldVisitor& v) { v.list("train_transforms", steps, ""); }
};

TEST(Augment, RngDrawsLikePythonsRandom) {
  AugmentRng rng(7);
  double sum = 0;
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 20000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    const auto k = rng.randint(0, 3);  // inclusive, as random.randint
    ASSERT_GE(k, 0);
    ASSERT_LE(k, 3);
    ++seen[static_cast<std::size_t>(k)];
  }
  EXPECT_NEAR(sum / 20000, 0.5, 0.01);
  for (int c : seen) EXPECT_NEAR(c, 5000, 300);
  EXPECT_EQ(rng.randint(5, 5), 5);
  double m = 0, q = 0;
  for (int i = 0; i < 20000; ++i) {
    const double z = rng.normal();
    m += z / 20000;
    q += z * z / 20000;
  }
  EXPECT_NEAR(m, 0.0, 0.03);
  EXPECT_NEAR(q, 1.0, 0.05);
  // Streams depend on the seed only; sample seeds differ per index and per epoch.
  AugmentRng a(99), b(99);
  EXPECT_EQ(a.next_u64(), b.next_u64());
  EXPECT_NE(sample_seed(1, 0), sample_seed(1, 1));
  EXPECT_NE(sample_seed(1, 0), sample_seed(2, 0));
}

TEST(Augment, ProbabilityAndComposition) {
  cv::Mat img(2, 3, CV_8UC1, cv::Scalar(0));
  img.at<std::uint8_t>(0, 0) = 9;
  const auto flipped_share = [&](const std::vector<TransformSpec>& specs) {
    const Pipeline p = make_pipeline(specs, "t");
    int flipped = 0;
    for (int i = 0; i < 4000; ++i) {
      Sample s{img.clone(), {}};
      AugmentRng rng(sample_seed(3, i));
      p.run(s, rng);
      flipped += s.image.at<std::uint8_t>(0, 2) == 9 ? 1 : 0;
    }
    return flipped / 4000.0;
  };
  TransformSpec flip;
  flip.name = "HorizontalFlip";  // default p = 0.5
  EXPECT_NEAR(flipped_share({flip}), 0.5, 0.03);
  flip.p = 1;
  EXPECT_EQ(flipped_share({flip}), 1.0);
  flip.p = 0;
  EXPECT_EQ(flipped_share({flip}), 0.0);
  // OneOf picks a child in proportion to its p, then applies it without its own draw.
  TransformSpec one;
  one.name = "OneOf";
  one.p = 1;
  TransformSpec a = flip, b;
  a.p = 3;  // weights need not sum to 1: 3 : 1
  b.name = "VerticalFlip";
  b.p = 1;
  one.transforms = {a, b};
  EXPECT_NE(message_of([&] { make_pipeline({one}, "data.train_transforms"); }).find("must be in [0, 1], got 3"),
            std::string::npos);
  a.p = 0.75;
  b.p = 0.25;
  one.transforms = {a, b};
  EXPECT_NEAR(flipped_share({one}), 0.75, 0.03);
  // SomeOf n = 1 of the two flips: exactly one applied each time, each under its own p = 1.
  TransformSpec some;
  some.name = "SomeOf";
  some.ints["n"] = 1;
  a.p = 1;
  b.p = 1;
  some.transforms = {a, b};
  EXPECT_NEAR(flipped_share({some}), 0.5, 0.03);
}

TEST(Augment, ConfigListsReadWithDefaultsAndExplainMistakes) {
  Steps s;
  load_config(
      "[[train_transforms]]\nname = \"Rotate\"\nlimit = 15\n[[train_transforms]]\nname = \"OneOf\"\n"
      "[[train_transforms.transforms]]\nname = \"CLAHE\"\nclip_limit = 2.0\n",
      "aug.toml", {}, visit_fn(s));
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(s.steps[0].numbers.at("limit"), (std::vector<double>{15}));
  EXPECT_DOUBLE_EQ(s.steps[0].p, 0.5);
  EXPECT_DOUBLE_EQ(s.steps[1].p, 0.5);
  ASSERT_EQ(s.steps[1].transforms.size(), 1u);
  EXPECT_EQ(s.steps[1].transforms[0].name, "CLAHE");
  EXPECT_NO_THROW(make_pipeline(s.steps, "data.train_transforms"));
  // Every parameter is written back, defaults included, and reads back the same.
  const std::string text = to_toml(visit_fn(s));
  EXPECT_NE(text.find("border_mode"), std::string::npos) << text;
  EXPECT_NE(text.find("tile_grid_size"), std::string::npos) << text;
  Steps again;
  load_config(text, "again", {}, visit_fn(again));
  EXPECT_EQ(again.steps[0].numbers, s.steps[0].numbers);
  EXPECT_EQ(again.steps[1].transforms[0].reals, s.steps[1].transforms[0].reals);

  EXPECT_NE(message_of([] {
              Steps e;
              load_config("[[train_transforms]]\nname = \"HorizontalFlp\"\n", "a.toml", {}, visit_fn(e));
            }).find("did you mean \"HorizontalFlip\"?"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              Steps e;
              load_config("[[train_transforms]]\nname = \"CLAHE\"\nclip_limt = 2\n", "a.toml", {}, visit_fn(e));
            })
                .find("unknown key \"train_transforms[0].clip_limt\" in [train_transforms[0]] (hint: did you mean "
                      "\"train_transforms[0].clip_limit\"?)"),
            std::string::npos);
  // Inline lists from the command line.
  Steps inline_list;
  load_config("", "x", {"train_transforms=[{name = \"VerticalFlip\", p = 1.0}]"}, visit_fn(inline_list));
  ASSERT_EQ(inline_list.steps.size(), 1u);
  EXPECT_EQ(inline_list.steps[0].name, "VerticalFlip");
  // Unknown names from C++ are refused when the pipeline is built.
  TransformSpec bad;
  bad.name = "Rotat";
  EXPECT_EQ(message_of([&] { make_pipeline({bad}, "data.eval_transforms"); }),
            "data.eval_transforms[0]: unknown transform \"Rotat\" (hint: did you mean \"Rotate\"?)");
}

TEST(Augment, RegistryHasAlbumentationsTransforms) {
  for (const char* n : {"Resize",
                        "SmallestMaxSize",
                        "LongestMaxSize",
                        "CenterCrop",
                        "RandomCrop",
                        "RandomResizedCrop",
                        "PadIfNeeded",
                        "HorizontalFlip",
                        "VerticalFlip",
                        "RandomRotate90",
                        "Rotate",
                        "Affine",
                        "ShiftScaleRotate",
                        "ElasticTransform",
                        "GridDistortion",
                        "CLAHE",
                        "RandomBrightnessContrast",
                        "RandomGamma",
                        "HueSaturationValue",
                        "ColorJitter",
                        "Solarize",
                        "Equalize",
                        "ToGray",
                        "GaussianBlur",
                        "MotionBlur",
                        "GaussNoise",
                        "CoarseDropout",
                        "Normalize",
                        "Compose",
                        "OneOf",
                        "SomeOf"})
    EXPECT_NE(find_transform(n), nullptr) << n;
  EXPECT_EQ(find_transform("Normalize")->default_p, 1.0);
  EXPECT_EQ(find_transform("RandomRotate90")->default_p, 1.0);
  EXPECT_EQ(find_transform("HorizontalFlip")->default_p, 0.5);
}

TEST(AugmentPreset, EveryPresetBuildsAndRunsBeforeAFinalNormalize) {
  for (const std::string& name : preset_names()) {
    const Pipeline p = make_pipeline(preset_transforms(name), name);
    EXPECT_FALSE(p.empty()) << name;
    Sample s{cv::Mat(32, 32, CV_8UC3, cv::Scalar(40, 90, 200)), {}};
    AugmentRng rng(3);
    p.run(s, rng);
    EXPECT_EQ(s.image.type(), CV_8UC3) << name;
  }
  EXPECT_EQ(preset_transforms("xray")[0].name, "CLAHE");
  EXPECT_EQ(preset_transforms("satellite")[3].numbers.at("gamma_limit"), (std::vector<double>{80, 120}));
  DataOptions o;
  TransformSpec crop;
  crop.name = "RandomCrop";
  TransformSpec norm;
  norm.name = "Normalize";
  o.train_transforms = {crop, norm};
  o.augment_preset = "production_line";
  const std::vector<TransformSpec> t = training_transforms(o);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].name, "RandomCrop");
  EXPECT_EQ(t[1].name, "RandomBrightnessContrast");
  EXPECT_EQ(t[2].name, "MotionBlur");
  EXPECT_EQ(t[3].name, "Normalize");
  o.augment_preset = "satelite";
  try {
    o.validate();
    ADD_FAILURE() << "an unknown preset was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.one_line().find("did you mean \"satellite\"?"), std::string::npos) << e.one_line();
  }
}

}  // namespace
}  // namespace glassbox::data
