// Reading and replacing a whole text file (text_file.hpp).
#include "common/text_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::common {

std::string read_text_file(const std::string& path, std::string_view what) {
  // Regular files only, checked before opening: a FIFO would block the open (and the rank), a
  // device such as /dev/zero would never end.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw invalid_input(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw invalid_input(fmt::format("cannot read {} {}: not a regular file", what, path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw invalid_input(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
  }
  std::string text(kMaxTextFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw invalid_input(fmt::format("cannot read {} {}: read error", what, path));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxTextFileBytes) {
    throw invalid_input(fmt::format("cannot read {} {}: larger than {} MiB, the most tpcomm reads",
                                    what, path, kMaxTextFileBytes >> 20));
  }
  return text;
}

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

void replace_text_file(const std::string& path, std::string_view text) {
  // lstat: a link is what the rename would replace. Whoever could put something else at `path`
  // between this check and the rename can write that directory, so could remove it anyway.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw invalid_input(fmt::format(
        "{} is {}, not a regular file; nothing was written (name a new or a regular file)", path,
        kind_of(st.st_mode)));
  }
  std::string tmp = path + ".XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    throw invalid_input(
        fmt::format("cannot create a file beside {}: {}", path, std::strerror(errno)));
  }
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int write_errno = errno;
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(written ? errno : write_errno);
    ::unlink(tmp.c_str());
    throw invalid_input(fmt::format("cannot write {}: {}", path, why));
  }
}

}  // namespace tpcomm::common
