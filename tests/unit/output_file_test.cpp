// The rules of an output path (runtime/io/output_file.h), on files made in a private temporary
// folder: a FIFO, a directory, a link, long and non-UTF-8 names. Devices need root to make
// (mknod); tests/integration/output_paths.sh makes them there, through the command line.
#include "runtime/io/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/core/error.h"

namespace dlb {
namespace {

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlb-output-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string at(const std::string& name) const { return dir_ + "/" + name; }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The folder's entries, to see that no temporary file is left behind.
  int entries() const {
    return std::system(("test $(ls -A '" + dir_ + "' | wc -l) -eq " +
                        std::to_string(expected_entries_) + "")
                           .c_str()) == 0;
  }
  std::string dir_;
  int expected_entries_ = 0;
};

TEST_F(OutputFile, ANewOrRegularFileIsWrittenWhole) {
  EXPECT_EQ(output_file_problem(at("r.json")), "");
  write_file_atomically(at("r.json"), "one");
  EXPECT_EQ(read(at("r.json")), "one");
  EXPECT_EQ(output_file_problem(at("r.json")), "");
  write_file_atomically(at("r.json"), std::vector<std::string_view>{"tw", "o"});
  EXPECT_EQ(read(at("r.json")), "two");
  expected_entries_ = 1;  // no temporary file left
  EXPECT_TRUE(entries());
}

TEST_F(OutputFile, AFifoOrADirectoryIsRefusedAndKept) {
  ASSERT_EQ(mkfifo(at("fifo").c_str(), 0644), 0);
  ASSERT_EQ(mkdir(at("dir").c_str(), 0755), 0);
  EXPECT_NE(output_file_problem(at("fifo")).find("it is a FIFO"), std::string::npos);
  EXPECT_NE(output_file_problem(at("dir")).find("it is a directory"), std::string::npos);
  EXPECT_THROW(write_file_atomically(at("fifo"), "x"), IoError);
  EXPECT_THROW(write_file_atomically(at("dir"), "x"), IoError);
  struct stat st {};
  ASSERT_EQ(stat(at("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(stat(at("dir").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  try {
    check_output_file(at("fifo"), "--json");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--json '" + at("fifo") + "': it is a FIFO", 0), 0u)
        << e.what();
  }
}

TEST_F(OutputFile, ALinkIsFollowedAndKept) {
  write_file_atomically(at("target"), "old");
  ASSERT_EQ(chmod(at("target").c_str(), 0600), 0);
  ASSERT_EQ(symlink(at("target").c_str(), at("link").c_str()), 0);
  write_file_atomically(at("link"), "new");
  struct stat st {};
  ASSERT_EQ(lstat(at("link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(read(at("target")), "new");
  ASSERT_EQ(stat(at("target").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // the replaced file's permissions are kept
  ASSERT_EQ(mkfifo(at("fifo").c_str(), 0644), 0);
  ASSERT_EQ(symlink(at("fifo").c_str(), at("to-fifo").c_str()), 0);
  EXPECT_NE(output_file_problem(at("to-fifo")).find("FIFO"), std::string::npos);
  EXPECT_THROW(write_file_atomically(at("to-fifo"), "x"), IoError);
}

TEST_F(OutputFile, PathsThatCannotHoldAFileAreRefused) {
  EXPECT_NE(output_file_problem(at("missing/r.json")).find("cannot be used"), std::string::npos);
  write_file_atomically(at("file"), "x");
  EXPECT_NE(output_file_problem(at("file/r.json")).find("cannot be used"), std::string::npos);
  EXPECT_NE(output_file_problem(at(std::string(256, 'a'))).find("NAME_MAX"), std::string::npos);
  EXPECT_EQ(output_file_problem(at(std::string(255, 'a'))), "");
  EXPECT_NE(output_file_problem(at("bad\xff.json")).find("UTF-8"), std::string::npos);
  EXPECT_NE(output_file_problem(std::string(5000, 'a')).find("PATH_MAX"), std::string::npos);
  EXPECT_NE(output_file_problem("").find("empty"), std::string::npos);
  if (geteuid() != 0) {  // root may write anywhere
    ASSERT_EQ(mkdir(at("ro").c_str(), 0555), 0);
    EXPECT_NE(output_file_problem(at("ro/r.json")).find("no file can be made"), std::string::npos);
  }
}

TEST_F(OutputFile, AFolderIsCreatableOrADirectory) {
  EXPECT_EQ(output_dir_problem(at("a/b/c")), "");  // made on use, parents too
  EXPECT_EQ(output_dir_problem(dir_), "");
  write_file_atomically(at("file"), "x");
  EXPECT_NE(output_dir_problem(at("file")).find("not a directory"), std::string::npos);
  EXPECT_NE(output_dir_problem(at("file/sub")).find("Not a directory"), std::string::npos);
  ASSERT_EQ(mkfifo(at("fifo").c_str(), 0644), 0);
  EXPECT_NE(output_dir_problem(at("fifo")).find("FIFO"), std::string::npos);
}

}  // namespace
}  // namespace dlb
