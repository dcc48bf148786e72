// Tests of the file formats: IDX (plain and gzip), NPY (against real NumPy), CSV.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/csv.h"
#include "glassbox/data/idx.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

namespace fs = std::filesystem;
using glassbox::testing::temp_dir;

at::Tensor i64(std::initializer_list<std::int64_t> v) { return torch::tensor(std::vector<std::int64_t>(v)); }

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs `fn`, expects a glassbox::Error with `code` whose message contains every one of `parts`.
template <class Fn>
Error expect_error(Fn fn, ErrorCode code, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), std::string(error_code_name(code))) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(e.message().find(p), std::string::npos) << "missing '" << p << "' in: " << e.what();
    return e;
  }
  ADD_FAILURE() << "no glassbox::Error thrown";
  return Error(ErrorCode::kInternal, "none");
}

// ---------------------------------------------------------------------------------------- IDX

TEST(Idx, RoundTripEveryDtypePlainAndGzip) {
  const fs::path dir = temp_dir("idx-roundtrip");
  std::vector<at::Tensor> tensors = {
      torch::arange(60, torch::kLong).remainder(256).to(torch::kByte).reshape({3, 4, 5}),
      torch::tensor({-128, -1, 0, 127}, torch::kChar),
      torch::tensor({-32768, -2, 258, 32767}, torch::kShort).reshape({2, 2}),
      torch::tensor({-2147483647 - 1, -5, 70000, 2147483647}, torch::kInt),
      torch::randn({2, 3, 2, 2}),
      torch::randn({7}, torch::kDouble),
      torch::zeros({0, 3}, torch::kByte),
  };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    for (bool gz : {false, true}) {
      const fs::path p = dir / ("t" + std::to_string(i) + (gz ? ".gz" : ""));
      write_idx(p, tensors[i], gz);
      const at::Tensor back = read_idx(p);
      EXPECT_EQ(back.scalar_type(), tensors[i].scalar_type()) << p;
      EXPECT_EQ(back.sizes(), tensors[i].sizes()) << p;
      EXPECT_TRUE(torch::equal(back, tensors[i])) << p;
    }
  }
  // gzip is recognised by its magic, not by the name.
  write_idx(dir / "no-suffix", tensors[2], /*gzip=*/true);
  EXPECT_EQ(read_file(dir / "no-suffix").substr(0, 2), "\x1f\x8b");
  EXPECT_TRUE(torch::equal(read_idx(dir / "no-suffix"), tensors[2]));
}

TEST(Idx, BytesAreBigEndianAsInTheSpec) {
  const std::string b = encode_idx(torch::tensor({1, -2}, torch::kShort));
  const std::string expected("\x00\x00\x0b\x01\x00\x00\x00\x02\x00\x01\xff\xfe", 12);
  EXPECT_EQ(b, expected);
  const at::Tensor f = decode_idx(std::string("\x00\x00\x0d\x01\x00\x00\x00\x01\x3f\x80\x00\x00", 12), "mem");
  EXPECT_EQ(f.scalar_type(), torch::kFloat);
  EXPECT_EQ(f.item<float>(), 1.0f);
}

TEST(Idx, TruncatedFileIsDataLossNamingFileAndSizesAndLeavesFileAlone) {
  const fs::path dir = temp_dir("idx-truncated");
  const fs::path p = dir / "images-idx3-ubyte";
  std::string bytes = encode_idx(torch::zeros({3, 4, 5}, torch::kByte));
  bytes.resize(bytes.size() - 10);
  write_bytes(p, bytes);
  const auto before = fs::last_write_time(p);
  Error e = expect_error([&] { read_idx(p); }, ErrorCode::kDataLoss,
                         {p.string() + ": truncated: expected 60 bytes of data, found 50"});
  EXPECT_FALSE(e.hint().empty());
  EXPECT_EQ(read_file(p), bytes);
  EXPECT_EQ(fs::last_write_time(p), before);

  // The same through gzip.
  const fs::path gz = dir / "images-idx3-ubyte.gz";
  write_bytes(gz, gzip_compress(bytes));
  expect_error([&] { read_idx(gz); }, ErrorCode::kDataLoss, {gz.string() + ": truncated: expected 60 bytes"});

  // A header cut short.
  write_bytes(p, std::string("\x00\x00\x08\x03\x00\x00\x00\x03", 8));
  expect_error([&] { read_idx(p); }, ErrorCode::kDataLoss, {p.string(), "truncated header"});
}

TEST(Idx, TrailingBytesAreAnError) {
  const fs::path p = temp_dir("idx-trailing") / "labels";
  std::string bytes = encode_idx(torch::zeros({10}, torch::kByte));
  write_bytes(p, bytes + "xyz");
  expect_error([&] { read_idx(p); }, ErrorCode::kDataLoss,
               {p.string(), "3 trailing bytes", "expected 10 bytes of data, found 13"});
}

TEST(Idx, BadMagicTypeAndRankAreRejected) {
  const fs::path dir = temp_dir("idx-magic");
  const fs::path p = dir / "x";
  write_bytes(p, std::string("PK\x03\x04 not idx at all", 20));
  expect_error([&] { read_idx(p); }, ErrorCode::kDataLoss, {p.string() + ": bad magic", "found 50 4b 03 04"});
  write_bytes(p, std::string("\x00\x00\x07\x01\x00\x00\x00\x00", 8));
  expect_error([&] { read_idx(p); }, ErrorCode::kDataLoss, {p.string(), "unknown IDX type code 0x07"});
  write_bytes(p, std::string("\x00\x00\x08\x00", 4));
  expect_error([&] { read_idx(p); }, ErrorCode::kDataLoss, {p.string(), "0 dimensions"});
  write_bytes(p, std::string("\x00\x00\x08\x05", 4));
  expect_error([&] { read_idx(p); }, ErrorCode::kDataLoss, {p.string(), "5 dimensions"});
  write_bytes(p, std::string("\x00\x00", 2));
  expect_error([&] { read_idx(p); }, ErrorCode::kDataLoss, {p.string(), "too short"});
  expect_error([&] { read_idx(dir / "missing"); }, ErrorCode::kNotFound, {(dir / "missing").string()});
}

TEST(Idx, CorruptAndTruncatedGzipAreDataLoss) {
  const fs::path dir = temp_dir("idx-gzip");
  const std::string gz = gzip_compress(encode_idx(torch::randint(0, 255, {50, 28, 28}).to(torch::kByte)));
  const fs::path cut = dir / "cut.gz";
  write_bytes(cut, gz.substr(0, gz.size() / 2));
  expect_error([&] { read_idx(cut); }, ErrorCode::kDataLoss, {cut.string(), "truncated gzip stream"});
  std::string bad = gz;
  for (std::size_t i = 20; i < 60; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  const fs::path corrupt = dir / "corrupt.gz";
  write_bytes(corrupt, bad);
  expect_error([&] { read_idx(corrupt); }, ErrorCode::kDataLoss, {corrupt.string(), "gzip"});
  EXPECT_EQ(read_file(corrupt), bad);
}

// ---------------------------------------------------------------------------------------- NPY

class NpyFromNumpy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(temp_dir("npy-numpy"));
    glassbox::testing::run_python("glassbox/data/testdata/npy_fixtures.py", {"write", dir_->string()});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path file(const std::string& name) { return *dir_ / name; }
  static fs::path* dir_;
};
fs::path* NpyFromNumpy::dir_ = nullptr;

TEST_F(NpyFromNumpy, Version1Float32) {
  const at::Tensor t = read_npy(file("v1_f4.npy"));
  EXPECT_EQ(t.scalar_type(), torch::kFloat);
  const at::Tensor expected = torch::arange(12, torch::kFloat).reshape({3, 4}) * 0.25 - 1;
  EXPECT_TRUE(torch::equal(t, expected)) << t;
}

TEST_F(NpyFromNumpy, Version2And3) {
  const at::Tensor v2 = read_npy(file("v2_i8.npy"));
  EXPECT_EQ(v2.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(v2, i64({-3, 0, 5, std::int64_t{1} << 40})));
  const at::Tensor v3 = read_npy(file("v3_u1.npy"));
  EXPECT_EQ(v3.scalar_type(), torch::kByte);
  EXPECT_TRUE(torch::equal(v3, torch::arange(250, 256, torch::kLong).to(torch::kByte).reshape({2, 3})));
}

TEST_F(NpyFromNumpy, FortranOrderIsReturnedInCOrder) {
  const at::Tensor t = read_npy(file("fortran_i4.npy"));
  EXPECT_EQ(t.sizes(), (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(torch::equal(t, torch::arange(24, torch::kInt).reshape({2, 3, 4})));
}

TEST_F(NpyFromNumpy, SmallDtypes) {
  EXPECT_TRUE(torch::equal(read_npy(file("b1.npy")), torch::tensor({true, false, true})));
  EXPECT_TRUE(torch::equal(read_npy(file("i1.npy")), torch::tensor({-128, 127, 0}, torch::kChar)));
  EXPECT_TRUE(torch::equal(read_npy(file("i2.npy")), torch::tensor({-32768, 32767, 258}, torch::kShort)));
  EXPECT_TRUE(torch::equal(read_npy(file("u2.npy")), torch::tensor({0, 65535, 258}, torch::kInt)));
  EXPECT_TRUE(torch::equal(read_npy(file("u4.npy")), i64({0, 4294967295})));
  EXPECT_TRUE(torch::equal(read_npy(file("u8_ok.npy")), i64({1, std::int64_t{1} << 62})));
  const at::Tensor h = read_npy(file("f2.npy"));
  EXPECT_EQ(h.scalar_type(), torch::kHalf);
  EXPECT_TRUE(torch::equal(h.to(torch::kFloat), torch::tensor({0.5f, -2.0f, 65504.0f})));
  const at::Tensor d = read_npy(file("f8.npy"));
  EXPECT_TRUE(torch::equal(d, torch::tensor({0.1, -1e300, M_PI, 0.0}, torch::kDouble).reshape({2, 2})));
  const at::Tensor s = read_npy(file("scalar_f8.npy"));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 2.5);
  EXPECT_EQ(read_npy(file("empty_f4.npy")).sizes(), (std::vector<std::int64_t>{0, 5}));
}

TEST_F(NpyFromNumpy, UnsupportedDtypesNameTheDtype) {
  expect_error([&] { read_npy(file("big_endian.npy")); }, ErrorCode::kInvalidArgument,
               {file("big_endian.npy").string(), "big-endian dtype '>i4'"});
  expect_error([&] { read_npy(file("unicode.npy")); }, ErrorCode::kInvalidArgument, {"unsupported dtype '<U2'"});
  expect_error([&] { read_npy(file("complex.npy")); }, ErrorCode::kInvalidArgument, {"unsupported dtype '<c8'"});
  expect_error([&] { read_npy(file("structured.npy")); }, ErrorCode::kDataLoss, {"structured dtype"});
  expect_error([&] { read_npy(file("u8_big.npy")); }, ErrorCode::kInvalidArgument,
               {"'<u8' value 18446744073709551615 at element 1"});
}

TEST_F(NpyFromNumpy, TruncatedAndCorruptFiles) {
  const std::string good = read_file(file("v1_f4.npy"));
  const fs::path dir = temp_dir("npy-bad");
  const fs::path cut = dir / "cut.npy";
  write_bytes(cut, good.substr(0, good.size() - 4));
  expect_error([&] { read_npy(cut); }, ErrorCode::kDataLoss,
               {cut.string() + ": truncated: shape (3, 4) of '<f4' needs 48 bytes of data, found 44"});
  const fs::path longer = dir / "long.npy";
  write_bytes(longer, good + "abcd");
  expect_error([&] { read_npy(longer); }, ErrorCode::kDataLoss, {longer.string(), "4 trailing bytes"});
  const fs::path magic = dir / "magic.npy";
  write_bytes(magic, "PK" + good.substr(2));
  expect_error([&] { read_npy(magic); }, ErrorCode::kDataLoss, {magic.string(), "not a .npy file"});
  std::string hdr = good;
  const std::size_t at = hdr.find("'shape'");
  ASSERT_NE(at, std::string::npos);
  hdr[at + 1] = 'X';  // 'Xhape'
  const fs::path key = dir / "key.npy";
  write_bytes(key, hdr);
  expect_error([&] { read_npy(key); }, ErrorCode::kDataLoss,
               {key.string(), "bad .npy header", "unexpected key 'Xhape'"});
  const fs::path hcut = dir / "hcut.npy";
  write_bytes(hcut, good.substr(0, 40));
  expect_error([&] { read_npy(hcut); }, ErrorCode::kDataLoss, {hcut.string(), "truncated header"});
}

// glassbox writes, NumPy reads: dtype, shape and bytes must match exactly.
TEST(Npy, WrittenFilesLoadInNumpyWithExactValues) {
  const fs::path dir = temp_dir("npy-write");
  torch::manual_seed(3);
  struct Case {
    at::Tensor t;
    const char* dtype;
    std::string shape;
  };
  std::vector<Case> cases = {
      {torch::randn({4, 3}), "<f4", "4,3"},
      {torch::randn({5}, torch::kDouble), "<f8", "5"},
      {i64({1, -2, 3, std::int64_t{1} << 50, -6, 0}).reshape({2, 3}), "<i8", "2,3"},
      {torch::tensor({-7, 8}, torch::kInt), "<i4", "2"},
      {torch::arange(6, torch::kLong).to(torch::kByte).reshape({1, 2, 3}), "|u1", "1,2,3"},
      {torch::tensor({true, false}), "|b1", "2"},
      {torch::randn({3}).to(torch::kHalf), "<f2", "3"},
      {torch::randn({2, 3}).t(), "<f4", "3,2"},  // non-contiguous input is written in C order
      {torch::zeros({0, 4}), "<f4", "0,4"},
  };
  std::vector<std::string> args = {"check"};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const fs::path npy = dir / ("c" + std::to_string(i) + ".npy");
    const fs::path raw = dir / ("c" + std::to_string(i) + ".raw");
    write_npy(npy, cases[i].t);
    const at::Tensor c = cases[i].t.contiguous();
    write_bytes(raw, std::string(static_cast<const char*>(c.const_data_ptr()), c.numel() * c.element_size()));
    args.insert(args.end(), {npy.string(), raw.string(), cases[i].dtype, cases[i].shape});
    // glassbox reads its own file back; the data starts at a multiple of 64 bytes.
    EXPECT_TRUE(torch::equal(read_npy(npy), c)) << i;
    EXPECT_EQ(read_file(npy).find("{'descr'"), 10u);
    EXPECT_EQ((read_file(npy).size() - c.numel() * c.element_size()) % 64, 0u);
  }
  const std::string out = glassbox::testing::run_python("glassbox/data/testdata/npy_fixtures.py", args);
  std::istringstream lines(out);
  std::string line;
  std::size_t i = 0;
  for (; std::getline(lines, line) && i < cases.size(); ++i) {
    EXPECT_EQ(line.rfind(std::string(cases[i].dtype) + " ", 0), 0u) << "case " << i << ": " << line;
    EXPECT_NE(line.find(" C equal "), std::string::npos) << "case " << i << ": " << line;
  }
  EXPECT_EQ(i, cases.size()) << out;
  // Values as NumPy prints them.
  EXPECT_NE(out.find("<i8 (2, 3) C equal [1, -2, 3, 1125899906842624, -6, 0]"), std::string::npos) << out;
  EXPECT_NE(out.find("|b1 (2,) C equal [True, False]"), std::string::npos) << out;
  expect_error([&] { write_npy(dir / "bf16.npy", torch::zeros({2}, torch::kBFloat16)); }, ErrorCode::kInvalidArgument,
               {"no dtype for BFloat16"});
  EXPECT_FALSE(fs::exists(dir / "bf16.npy"));
}

// ---------------------------------------------------------------------------------------- CSV

TEST(Csv, ReadsFeaturesAndLabels) {
  const fs::path p = temp_dir("csv-good") / "train.csv";
  write_bytes(p, "\xEF\xBB\xBFx1, label ,\"x,2\"\r\n1.5,0,2\r\n\r\n-3e2,2,\"4.25\"\r\n+7,1,nan\r\n");
  const CsvTable t = read_csv(p, "label");
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"x1", "x,2"}));
  ASSERT_EQ(t.features.sizes(), (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(t.features.scalar_type(), torch::kFloat);
  EXPECT_EQ(t.labels.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(t.labels, i64({0, 2, 1})));
  EXPECT_EQ(t.features[0][0].item<float>(), 1.5f);
  EXPECT_EQ(t.features[1][0].item<float>(), -300.0f);
  EXPECT_EQ(t.features[1][1].item<float>(), 4.25f);
  EXPECT_EQ(t.features[2][0].item<float>(), 7.0f);
  EXPECT_TRUE(std::isnan(t.features[2][1].item<float>()));
  // gzip-compressed CSV
  const fs::path gz = p.parent_path() / "train.csv.gz";
  write_bytes(gz, gzip_compress(read_file(p)));
  EXPECT_TRUE(torch::equal(read_csv(gz, "label").features.nan_to_num(), t.features.nan_to_num()));
}

TEST(Csv, ErrorsNameFileLineAndColumn) {
  const fs::path dir = temp_dir("csv-bad");
  const fs::path p = dir / "t.csv";
  write_bytes(p, "a,b,label\n1,2,0\n3,abc,1\n");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kDataLoss,
               {p.string() + ":3: column 2 ('b'): 'abc' is not a number"});
  write_bytes(p, "a,b,label\n1,2,0\n3,4\n");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kDataLoss,
               {p.string() + ":3: expected 3 fields as in the header, found 2"});
  write_bytes(p, "a,b,label\n1,,0\n");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kDataLoss, {p.string() + ":2: column 2 ('b'): empty cell"});
  write_bytes(p, "a,b,label\n1,2,0.5\n");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kDataLoss,
               {p.string() + ":2: column 3 ('label'): label '0.5' is not an integer"});
  write_bytes(p, "a,b,label\n1,2,3.0\n");
  EXPECT_EQ(read_csv(p, "label").labels[0].item<std::int64_t>(), 3);
  write_bytes(p, "a,b,lable\n1,2,0\n");
  Error e = expect_error([&] { read_csv(p, "label"); }, ErrorCode::kNotFound,
                         {p.string() + ":1: no label column 'label'", "columns: a, b, lable"});
  EXPECT_NE(e.hint().find("did you mean 'lable'"), std::string::npos) << e.hint();
  write_bytes(p, "label\n1\n");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kDataLoss, {"no feature columns"});
  write_bytes(p, "");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kDataLoss, {p.string() + ": empty CSV file"});
  write_bytes(p, "a,label\n\"1,0\n");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kDataLoss, {p.string() + ":2: unterminated quoted field"});
}

TEST(Csv, ClassNameLabelsBecomeSortedIndices) {
  const fs::path p = temp_dir("csv-names") / "train.csv";
  write_bytes(p, "x,label\n1,cat\n2,\"dog, large\"\n3,ant\n4,cat\n5, Cat \n6,dog\n");
  const CsvTable t = read_csv(p, "label");
  // Byte order, as Python's sorted(): upper case before lower case.
  EXPECT_EQ(t.label_names, (std::vector<std::string>{"Cat", "ant", "cat", "dog", "dog, large"}));
  EXPECT_TRUE(torch::equal(t.labels, i64({2, 4, 1, 2, 0, 3})));
  EXPECT_EQ(t.labels.scalar_type(), torch::kLong);
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"x"}));
  EXPECT_EQ(t.features.size(0), 6);
  // Integer labels leave label_names empty.
  write_bytes(p, "x,label\n1,3\n2,0\n");
  EXPECT_TRUE(read_csv(p, "label").label_names.empty());
  // A header only: no labels of either kind.
  write_bytes(p, "x,label\n");
  const CsvTable empty = read_csv(p, "label");
  EXPECT_TRUE(empty.label_names.empty());
  EXPECT_EQ(empty.labels.numel(), 0);
}

TEST(Csv, LabelColumnMixingNumbersAndNamesIsAnError) {
  const fs::path p = temp_dir("csv-mixed") / "t.csv";
  write_bytes(p, "a,label\n1,cat\n2,dog\n3,1\n");
  Error e =
      expect_error([&] { read_csv(p, "label"); }, ErrorCode::kInvalidArgument,
                   {p.string() + ":4: column 2 ('label'): label '1' is a number but label 'cat' (line 2) is a name"});
  EXPECT_NE(e.hint().find("either integer labels 0..K-1 or class names"), std::string::npos) << e.hint();
  write_bytes(p, "a,label\n1,0\n2,1\n3,N/A\n");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kInvalidArgument,
               {p.string() + ":4: column 2 ('label'): label 'N/A' is a name but label '0' (line 2) is a number"});
  write_bytes(p, "a,label\n1,cat\n2,\n");
  expect_error([&] { read_csv(p, "label"); }, ErrorCode::kDataLoss,
               {p.string() + ":3: column 2 ('label'): empty label"});
}

}  // namespace
}  // namespace glassbox::data
