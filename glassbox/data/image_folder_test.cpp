#include "glassbox/data/image_folder.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/augment.h"
#include "glassbox/data/image.h"
#include "glassbox/data/image_preprocessing.h"
#include "glassbox/data/loader.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

namespace fs = std::filesystem;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.one_line();
  }
  return "<no error>";
}

// A gray h x w PNG whose pixels are all `v` (class k images get v = 40k + i).
void write_png(const fs::path& p, int v, int h = 6, int w = 5, int channels = 1) {
  fs::create_directories(p.parent_path());
  write_file_atomic(p, encode_png(cv::Mat(h, w, CV_8UC(channels), cv::Scalar::all(v))));
}

DataOptions folder_options(const fs::path& root) {
  DataOptions o;
  o.format = DataFormat::kImageFolder;
  o.root = root.string();
  o.val_size = 0;
  o.test_size = 0;
  o.normalize = false;
  return o;
}

std::vector<std::int64_t> labels_of(const Dataset& d) {
  const at::Tensor t = d.all_targets();
  return std::vector<std::int64_t>(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel());
}

TEST(ImageFolder, ClassFoldersInTorchvisionOrderWithAStratifiedSplit) {
  const fs::path root = testing::temp_dir("imgf_classes");
  // Two classes; "cat" has a nested folder; hidden folders and other files are not read.
  for (int i = 0; i < 12; ++i) write_png(root / "dog" / ("d" + std::to_string(i) + ".png"), 100 + i);
  for (int i = 0; i < 6; ++i) write_png(root / "cat" / ("c" + std::to_string(i) + ".PNG"), i);
  write_png(root / "cat" / "sub" / "a.png", 50);
  write_png(root / "cat" / "z.png", 51);
  write_png(root / ".ipynb_checkpoints" / "x.png", 200);
  write_file_atomic(root / "cat" / "notes.txt", "not an image");
  DataOptions o = folder_options(root);
  Splits s = load_splits(o);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(s.train->size(), 20);
  const auto& files = dynamic_cast<const ImageDataset&>(*s.train).files();
  // torchvision: files of a folder before those of its sub-folders, each sorted by name.
  EXPECT_EQ(files[0].file.filename(), "c0.PNG");
  EXPECT_EQ(files[6].file.filename(), "z.png");
  EXPECT_EQ(files[7].file.filename(), "a.png");
  EXPECT_EQ(labels_of(*s.train)[8], 1);
  // Pixels / 255 as float32 [1, 6, 5].
  const Batch b = s.train->get_batch(torch::tensor({0, 8}));
  EXPECT_EQ(b.inputs.sizes(), (std::vector<std::int64_t>{2, 1, 6, 5}));
  EXPECT_FLOAT_EQ(b.inputs[1][0][2][2].item<float>(), 100.0f / 255.0f);
  EXPECT_EQ(b.targets[1].item<std::int64_t>(), 1);

  // test_size and val_size are drawn per class, in proportion: 25 % of 20 is 5 = 2 cats + 3 dogs.
  o.test_size = 0.25;
  o.val_size = 3;
  s = load_splits(o);
  EXPECT_EQ(s.test->size(), 5);
  EXPECT_EQ(s.val->size(), 3);
  EXPECT_EQ(s.train->size(), 12);
  const auto test_labels = labels_of(*s.test);
  EXPECT_EQ(std::count(test_labels.begin(), test_labels.end(), 0), 2);
  // Seeded: the same split again, another with another seed.
  Splits again = load_splits(o);
  EXPECT_EQ(dynamic_cast<const ImageDataset&>(*again.test).files(), dynamic_cast<const ImageDataset&>(*s.test).files());
  o.split_seed = 7;
  Splits other = load_splits(o);
  EXPECT_NE(dynamic_cast<const ImageDataset&>(*other.test).files(), dynamic_cast<const ImageDataset&>(*s.test).files());
}

TEST(ImageFolder, SplitFoldersAndNormalisation) {
  const fs::path root = testing::temp_dir("imgf_splits");
  for (int i = 0; i < 4; ++i) {
    write_png(root / "train" / "a" / (std::to_string(i) + ".png"), 10 * i, 6, 5, 3);
    write_png(root / "train" / "b" / (std::to_string(i) + ".png"), 200, 6, 5, 3);
  }
  write_png(root / "val" / "b" / "v.png", 7, 6, 5, 3);
  write_png(root / "test" / "a" / "t.png", 9, 6, 5, 3);
  DataOptions o = folder_options(root);
  o.normalize = true;
  Splits s = load_splits(o);
  EXPECT_EQ(s.train->size(), 8);
  EXPECT_EQ(s.val->size(), 1);
  EXPECT_EQ(s.test->size(), 1);
  EXPECT_EQ(s.sample_shape, (std::vector<std::int64_t>{3, 6, 5}));
  // Mean/std per channel over the training pixels / 255.
  std::vector<double> v = {0, 10, 20, 30, 200, 200, 200, 200};
  double m = 0, q = 0;
  for (double x : v) m += x / 255 / 8;
  for (double x : v) q += (x / 255 - m) * (x / 255 - m) / 8;
  ASSERT_EQ(s.mean.size(), 3u);
  EXPECT_NEAR(s.mean[1], m, 1e-9);
  EXPECT_NEAR(s.std[2], std::sqrt(q), 1e-9);
  const Batch b = s.test->get_batch(torch::tensor({0}));
  EXPECT_NEAR(b.inputs[0][0][0][0].item<float>(), (9.0 / 255 - m) / std::sqrt(q), 1e-5);

  // A class folder of val/ that training does not have names itself.
  write_png(root / "val" / "c" / "x.png", 1, 6, 5, 3);
  EXPECT_NE(message_of([&] { load_splits(o); }).find("class 'c' is not a class of the training split"),
            std::string::npos);
}

TEST(ImageFolder, MetadataWithSplitAndDateColumns) {
  const fs::path root = testing::temp_dir("imgf_meta");
  std::string csv = "file_name,label,split,captured\n";
  const char* dates[] = {"2024-01-05", "2024-03-01", "2024-06-30", "2024-07-02", "2024-07-31T10:00", "2024-08-01"};
  for (int i = 0; i < 6; ++i) {
    const std::string f = "img/" + std::to_string(i) + ".png";
    write_png(root / f, i);
    csv += f + "," + (i % 2 ? "rust" : "crack") + "," +
           (i < 4    ? "train"
            : i == 4 ? "validation"
                     : "test") +
           "," + dates[i] + "\n";
  }
  write_file_atomic(root / "metadata.csv", csv);
  DataOptions o = folder_options(root);
  Splits s = load_splits(o);  // the split column
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"crack", "rust"}));
  EXPECT_EQ(s.train->size(), 4);
  EXPECT_EQ(s.val->size(), 1);
  EXPECT_EQ(s.test->size(), 1);
  EXPECT_EQ(labels_of(*s.train), (std::vector<std::int64_t>{0, 1, 0, 1}));
  // By date: January-June trains, July validates, August tests.
  o.split_by = SplitBy::kDate;
  o.date_column = "captured";
  o.val_from = "2024-07-01";
  o.test_from = "2024-08-01";
  s = load_splits(o);
  EXPECT_EQ(s.train->size(), 3);
  EXPECT_EQ(s.val->size(), 2);
  EXPECT_EQ(s.test->size(), 1);
  // A row naming a missing file, a missing column, a date that is not ISO.
  write_file_atomic(root / "metadata.csv", csv + "img/none.png,rust,train,2024-01-01\n");
  EXPECT_NE(message_of([&] { load_splits(o); }).find("metadata.csv:8: file_name img/none.png does not exist under"),
            std::string::npos);
  write_file_atomic(root / "metadata.csv", csv + "img/0.png,rust,train,1/2/2024\n");
  EXPECT_NE(message_of([&] { load_splits(o); }).find("date '1/2/2024' in column 'captured' is not ISO 8601"),
            std::string::npos);
  o.date_column = "capture";
  write_file_atomic(root / "metadata.csv", csv);
  EXPECT_NE(
      message_of([&] { load_splits(o); }).find("no column 'capture' in the header (hint: did you mean 'captured'?"),
      std::string::npos);
}

TEST(ImageFolder, BadFoldersAndFilesNameThemselves) {
  const fs::path root = testing::temp_dir("imgf_bad");
  write_png(root / "a" / "1.png", 1);
  write_png(root / "a" / "2.png", 2);
  fs::create_directories(root / "b");
  DataOptions o = folder_options(root);
  EXPECT_EQ(
      message_of([&] { load_splits(o); }),
      "the class folder " + (root / "b").string() +
          " holds no images (.jpg .jpeg .png .bmp .tif .tiff .webp .pgm .ppm) (hint: add images to it or remove it)");
  write_png(root / "b" / "3.png", 3, 7, 5);  // another size
  write_file_atomic(root / "b" / "4.jpg", encode_jpeg(cv::Mat(6, 5, CV_8UC1, cv::Scalar(9))).substr(0, 60));
  // The cut file stops the load (its last bytes are read then), before any training starts ...
  EXPECT_NE(message_of([&] { load_splits(o); }).find("4.jpg: truncated JPEG"), std::string::npos);
  // ... and without the load-time checks, the batch that decodes it.
  o.check_images = false;
  Splits s = load_splits(o);
  o.check_images = true;
  EXPECT_NE(message_of([&] {
              s.train->get_batch(torch::tensor({2}));
            }).find("3.png: the image comes out 1x7x5 (CxHxW) but the data set's samples are 1x6x5"),
            std::string::npos);
  EXPECT_NE(message_of([&] { s.train->get_batch(torch::tensor({3})); }).find("4.jpg: truncated JPEG"),
            std::string::npos);
  // Left out and counted with on_bad_image = "skip".
  o.on_bad_image = OnBadImage::kSkip;
  s = load_splits(o);
  EXPECT_EQ(s.train->size(), 3);
  ASSERT_EQ(s.skipped_files.size(), 1u);
  EXPECT_NE(s.skipped_files[0].find("4.jpg: truncated JPEG"), std::string::npos);
  o.root = (root / "a" / "1.png").string();
  EXPECT_NE(message_of([&] { load_splits(o); }).find("is not a folder"), std::string::npos);
  o.root = (root / "missing").string();
  EXPECT_NE(message_of([&] { load_splits(o); }).find("is not a folder"), std::string::npos);
}

TEST(ImageFolder, AugmentedBatchesDependOnSeedEpochAndIndexOnly) {
  const fs::path root = testing::temp_dir("imgf_aug");
  for (int k = 0; k < 2; ++k) {
    for (int i = 0; i < 10; ++i) {
      cv::Mat m(9, 7, CV_8UC3);
      cv::randu(m, cv::Scalar::all(0), cv::Scalar::all(255));
      fs::create_directories(root / std::to_string(k));
      write_file_atomic(root / std::to_string(k) / (std::to_string(i) + ".png"), encode_png(m));
    }
  }
  DataOptions o = folder_options(root);
  o.test_size = 4;
  TransformSpec flip;
  flip.name = "HorizontalFlip";
  TransformSpec crop;
  crop.name = "RandomCrop";
  crop.ints["height"] = 6;
  crop.ints["width"] = 5;
  o.train_transforms = {flip, crop};
  TransformSpec center;
  center.name = "CenterCrop";
  center.ints["height"] = 6;
  center.ints["width"] = 5;
  o.eval_transforms = {center};
  const Splits s = load_splits(o);
  EXPECT_EQ(s.sample_shape, (std::vector<std::int64_t>{3, 6, 5}));
  const auto epochs = [&](std::int64_t workers) {
    LoaderOptions lo;
    lo.batch_size = 4;
    lo.shuffle = true;
    lo.seed = 11;
    lo.num_workers = workers;
    Loader loader(s.train, lo);
    std::vector<at::Tensor> out;
    for (std::int64_t e = 0; e < 2; ++e) {
      loader.start_epoch(e);
      while (auto b = loader.next()) out.push_back(b->inputs);
    }
    return torch::cat(out);
  };
  const at::Tensor a = epochs(0), b = epochs(3);
  EXPECT_TRUE(torch::equal(a, b));  // any worker count, the same batches
  // The two epochs draw differently (a sample's crop or flip changes between epochs).
  const ImageDataset& ds = dynamic_cast<const ImageDataset&>(*s.train);
  int changed = 0;
  for (std::int64_t i = 0; i < ds.size(); ++i)
    changed += torch::equal(ds.to_tensor(ds.sample(i, 1), ds.files()[0]), ds.to_tensor(ds.sample(i, 2), ds.files()[0]))
                   ? 0
                   : 1;
  EXPECT_GT(changed, 10);
  // Evaluation is deterministic: the centre crop of the decoded file.
  const Batch t = s.test->get_batch(torch::tensor({0}));
  EXPECT_EQ(t.inputs.sizes(), (std::vector<std::int64_t>{1, 3, 6, 5}));
}

TEST(ImageFolder, BatchesEqualTheSamplesOneByOne) {
  // get_batch decodes only a leading RandomResizedCrop's rectangle, writes a trailing Normalize
  // straight into the batch's planes and recycles the batch memory; the tensors must still equal
  // each sample decoded whole, transformed step by step and converted on its own.
  const fs::path root = testing::temp_dir("imgf_fused");
  for (int i = 0; i < 6; ++i) {
    cv::Mat img(90 + 7 * i, 120 - 5 * i, CV_8UC3);
    cv::randu(img, 0, 256);
    cv::GaussianBlur(img, img, cv::Size(5, 5), 0);
    fs::create_directories(root / (i % 2 ? "a" : "b"));
    write_file_atomic(root / (i % 2 ? "a" : "b") / (std::to_string(i) + ".jpg"), encode_jpeg(img, 90));
  }
  TransformSpec crop;
  crop.name = "RandomResizedCrop";
  crop.numbers["size"] = {32, 40};
  TransformSpec flip;
  flip.name = "HorizontalFlip";
  TransformSpec norm;
  norm.name = "Normalize";
  TransformSpec resize;
  resize.name = "Resize";
  resize.ints["height"] = 32;
  resize.ints["width"] = 40;
  for (const bool normalize_step : {true, false}) {
    DataOptions o = folder_options(root);
    o.train_transforms = {crop, flip};
    o.eval_transforms = {resize};
    if (normalize_step) {
      o.train_transforms.push_back(norm);
      o.eval_transforms.push_back(norm);
    }
    o.normalize = !normalize_step;  // without the step: data.mean/std on pixels / 255
    const Splits s = load_splits(o);
    const auto& ds = dynamic_cast<const ImageDataset&>(*s.train);
    ASSERT_EQ(ds.options().pipeline->trailing_planar() != nullptr, normalize_step);
    for (std::uint64_t seed : {0u, 7u}) {
      const Batch b = ds.get_epoch_batch(torch::arange(ds.size()), seed);
      for (std::int64_t i = 0; i < ds.size(); ++i) {
        Sample one{read_image(ds.files()[static_cast<std::size_t>(i)], 3), {}};
        AugmentRng rng(sample_seed(seed, i));
        ds.options().pipeline->run(one, rng);
        EXPECT_TRUE(torch::equal(b.inputs[i], ds.to_tensor(one, ds.files()[static_cast<std::size_t>(i)])))
            << "sample " << i << " seed " << seed << (normalize_step ? " with" : " without") << " Normalize";
      }
    }
  }
}

TEST(ImagePreprocessing, ContractJsonRebuildsTheEvalPipelineAndFoldsNormalize) {
  DataOptions d;
  d.format = DataFormat::kImageFolder;
  TransformSpec resize;
  resize.name = "SmallestMaxSize";
  resize.numbers["max_size"] = {20};
  TransformSpec crop;
  crop.name = "CenterCrop";
  crop.ints["height"] = 16;
  crop.ints["width"] = 16;
  TransformSpec norm;
  norm.name = "Normalize";
  norm.numbers["mean"] = {0.5, 0.4, 0.3};
  norm.numbers["std"] = {0.2, 0.2, 0.2};
  d.eval_transforms = {resize, crop, norm};
  const ImagePreprocessing p = image_preprocessing_of(d, 3);
  ASSERT_EQ(p.transforms.size(), 2u);  // Normalize became the contract's constants
  const auto st = standardization_of(d.eval_transforms);
  ASSERT_TRUE(st.has_value());
  EXPECT_DOUBLE_EQ(st->scale, 1.0 / 255);
  EXPECT_EQ(st->mean, (std::vector<double>{0.5, 0.4, 0.3}));
  const ImagePreprocessing back = image_preprocessing_from_json(nlohmann::json::parse(to_json(p).dump()), "c.json");
  ASSERT_EQ(back.transforms.size(), 2u);
  EXPECT_EQ(back.transforms[1].ints.at("height"), 16);
  // The preprocessor's sample equals the data set's eval pipeline on the same file.
  cv::Mat img(30, 40, CV_8UC3);
  cv::randu(img, 0, 255);
  const std::string png = encode_png(img);
  const at::Tensor t = ImagePreprocessor(back)(png, "x.png");
  EXPECT_EQ(t.sizes().vec(), (std::vector<std::int64_t>{3, 16, 16}));
  Sample s{decode_image(png, "x.png", 3), {}};
  AugmentRng rng(0);
  make_pipeline({resize, crop}, "t").run(s, rng);
  EXPECT_TRUE(torch::equal(t, image_to_tensor(s.image)));
  nlohmann::json bad = to_json(p);
  bad["transforms"][0]["max_sise"] = 3;
  EXPECT_THROW(image_preprocessing_from_json(bad, "c.json"), Error);

  // Where the output's pixels come from: scale 40/27 and 30/20, offset by the centre crop.
  const auto a = source_affine(img, make_pipeline({resize, crop}, "t"));
  ASSERT_TRUE(a.has_value());
  EXPECT_NEAR((*a)(0, 0), 40.0 / 27, 0.03);
  EXPECT_NEAR((*a)(1, 1), 1.5, 0.03);
  EXPECT_NEAR((*a)(0, 1), 0.0, 0.01);
  EXPECT_NEAR((*a)(0, 2), 5 * 40.0 / 27, 1.0);
  EXPECT_NEAR((*a)(1, 2), 2 * 1.5, 1.0);
  TransformSpec flip;
  flip.name = "HorizontalFlip";
  flip.p = 1;
  const auto f = source_affine(img, make_pipeline({flip}, "t"));
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR((*f)(0, 0), -1.0, 1e-6);
  EXPECT_NEAR((*f)(0, 2), 39.0, 1e-6);
}

// Resident memory of this process (VmRSS), in bytes.
std::int64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

TEST(ImageLoader, ResidentMemoryStaysBoundedByThePrefetchDepthNotTheDataSet) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer keeps freed memory in its quarantine (256 MB): resident memory says nothing here";
#endif
  // 2000 RGB 64x64 images: an epoch decodes 98 MB of float32 samples; the loader holds only the
  // batches in flight (2 workers x prefetch 2 x 16 samples, about 3 MB).
  const fs::path root = testing::temp_dir("imgf_rss");
  cv::RNG noise(7);
  for (int i = 0; i < 2000; ++i) {
    cv::Mat img(64, 64, CV_8UC3);
    noise.fill(img, cv::RNG::UNIFORM, 0, 256);
    fs::create_directories(root / std::to_string(i % 4));
    write_file_atomic(root / std::to_string(i % 4) / (std::to_string(i) + ".png"), encode_png(img));
  }
  DataOptions o = folder_options(root);
  const Splits s = load_splits(o);
  ASSERT_EQ(s.train->size(), 2000);
  LoaderOptions lo;
  lo.batch_size = 16;
  lo.num_workers = 2;
  lo.prefetch_factor = 2;
  lo.shuffle = true;
  lo.persistent_workers = true;
  Loader loader(s.train, lo);
  const std::int64_t before = resident_bytes();
  ASSERT_GT(before, 0);
  std::int64_t peak = before, after_first = 0;
  double checksum = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    loader.start_epoch(epoch);
    while (auto b = loader.next()) {
      checksum += b->inputs[0][0][0][0].item<double>();
      peak = std::max(peak, resident_bytes());
    }
    if (epoch == 0) after_first = resident_bytes();
  }
  const std::int64_t after = resident_bytes();
  EXPECT_NE(checksum, 0.0);
  const double mb = 1024.0 * 1024.0;
  std::printf("[ rss ] before %.1f MB, peak +%.1f MB, after epoch 1 +%.1f MB, after epoch 3 +%.1f MB\n", before / mb,
              (peak - before) / mb, (after_first - before) / mb, (after - before) / mb);
  EXPECT_LT(peak - before, 48 * 1024 * 1024) << "the loader holds far more than its prefetch window";
  EXPECT_LT(after - after_first, 16 * 1024 * 1024) << "memory grows epoch after epoch";
}

}  // namespace
}  // namespace glassbox::data
