// WebDataset's tar shards as a source (workloads/data/tar_reader.h): the members our writer and
// Python's tarfile write (ustar, a GNU long name, a pax path), a header that lies refused with the
// file's name, and shards indexed into samples: an image and its label per key, a sample without
// either skipped and noted.
#include "workloads/data/tar_reader.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/core/error.h"
#include "workloads/data/tar_writer.h"

namespace dlb {
namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class TarReader : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlb-tar-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(TarReader, ReadsTheMembersTheWriterWrote) {
  TarWriter w(path("a.tar"));
  w.add("00000000.jpg", bytes_of("abc"));
  w.add("00000000.cls", bytes_of("7"));
  w.add("00000001.jpg", std::vector<uint8_t>(600, 9));  // past one block
  w.finish();
  const std::vector<uint8_t> tar = read_all(path("a.tar"));
  const std::vector<TarMember> m = tar_members(tar.data(), tar.size(), "a.tar");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].name, "00000000.jpg");
  EXPECT_EQ(std::string(tar.begin() + m[0].offset, tar.begin() + m[0].offset + m[0].size), "abc");
  EXPECT_EQ(m[2].size, 600u);
  EXPECT_EQ(m[2].offset, 512u * 5);  // three headers, "abc" and "7" a block each
}

// A GNU long name ('L') and a pax header's path ('x') name the member after them.
TEST_F(TarReader, LongNamesFromGnuAndPaxHeaders) {
  auto header = [](const std::string& name, uint64_t size, char type) {
    std::vector<char> h = tar_header(name, size);
    h[156] = type;
    std::memset(&h[148], ' ', 8);
    unsigned sum = 0;
    for (char c : h) sum += static_cast<unsigned char>(c);
    std::snprintf(&h[148], 8, "%06o", sum);
    return std::vector<uint8_t>(h.begin(), h.end());
  };
  const std::string long_name = std::string(120, 'k') + ".jpg";
  std::vector<uint8_t> tar = header("././@LongLink", long_name.size() + 1, 'L');
  std::vector<uint8_t> data(512, 0);
  std::memcpy(data.data(), long_name.c_str(), long_name.size());
  tar.insert(tar.end(), data.begin(), data.end());
  const std::vector<uint8_t> file = header("short.jpg", 0, '0');
  tar.insert(tar.end(), file.begin(), file.end());
  const std::string pax = "30 path=" + std::string(21, 'p') + ".cls\n";
  const std::vector<uint8_t> x = header("PaxHeader", pax.size(), 'x');
  tar.insert(tar.end(), x.begin(), x.end());
  std::vector<uint8_t> pax_data(512, 0);
  std::memcpy(pax_data.data(), pax.data(), pax.size());
  tar.insert(tar.end(), pax_data.begin(), pax_data.end());
  const std::vector<uint8_t> second = header("short.cls", 0, '0');
  tar.insert(tar.end(), second.begin(), second.end());
  tar.resize(tar.size() + 1024, 0);
  const std::vector<TarMember> m = tar_members(tar.data(), tar.size(), "long.tar");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].name, long_name);
  EXPECT_EQ(m[1].name, std::string(21, 'p') + ".cls");
}

TEST_F(TarReader, AHeaderThatLiesIsRefusedNamingTheFile) {
  TarWriter w(path("b.tar"));
  w.add("x.jpg", std::vector<uint8_t>(1000, 1));
  w.finish();
  std::vector<uint8_t> tar = read_all(path("b.tar"));
  std::vector<uint8_t> bad = tar;
  bad[0] = 'y';  // the name changed, the checksum not
  EXPECT_THROW(tar_members(bad.data(), bad.size(), "b.tar"), InvalidArgument);
  bad = tar;
  bad.resize(800);  // the member runs past the end
  try {
    tar_members(bad.data(), bad.size(), "b.tar");
    FAIL() << "a truncated member was read";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("b.tar: a member runs past the end"), std::string::npos);
  }
  EXPECT_TRUE(tar_members(tar.data(), 0, "empty.tar").empty());
}

TEST_F(TarReader, ShardsAreSamplesOfAnImageAndItsLabel) {
  for (int s = 0; s < 2; ++s) {
    TarWriter w(path("shard-00000" + std::to_string(s) + ".tar"));
    for (int k = 0; k < 3; ++k) {
      const std::string key = std::to_string(s * 3 + k);
      w.add(key + ".jpg", bytes_of("image " + key));
      if (!(s == 1 && k == 1)) w.add(key + ".cls", bytes_of(std::to_string(k + 2) + "\n"));
    }
    w.add("7.JPEG", bytes_of("no label"));
    w.add("7.cls", bytes_of("seven"));  // not a whole number
    w.finish();
  }
  const ShardIndex index = index_shards(path("shard-*.tar"));
  ASSERT_EQ(index.shards.size(), 2u);
  ASSERT_EQ(index.samples.size(), 5u);  // 6, less the one without a label
  EXPECT_EQ(index.classes, 5);          // labels 2, 3, 4
  EXPECT_EQ(index.samples[0].label, 2);
  EXPECT_EQ(index.samples[4].path, path("shard-000001.tar"));
  EXPECT_EQ(index.samples[4].label, 4);
  const std::vector<uint8_t> second = read_all(path("shard-000001.tar"));
  const ImageSample& s = index.samples[3];
  EXPECT_EQ(std::string(second.begin() + s.offset, second.begin() + s.offset + s.size), "image 3");
  ASSERT_EQ(index.notes.size(), 3u);
  EXPECT_NE(index.notes[1].find("sample 4 has no whole-number .cls label"), std::string::npos)
      << index.notes[1];
  EXPECT_EQ(index_shards(dir_.string()).samples.size(), 5u);  // a folder: its *.tar
  EXPECT_THROW(index_shards(path("none-*.tar")), InvalidArgument);
}

}  // namespace
}  // namespace dlb
