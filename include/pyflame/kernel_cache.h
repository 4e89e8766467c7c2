#pragma once
// The run-time compiler's disk cache: compiled GPU code (a cubin or an AMD code
// object) kept across processes, so a graph compiled once loads in a new process
// without its compiler (issue 23: the warm cache's target is 100 ms).
//
// Design. One file per entry, `<hash of the key>.pfk`, in one directory
// ($PYFLAME_KERNEL_CACHE, else $XDG_CACHE_HOME/pyflame/kernels, else
// ~/.cache/pyflame/kernels). The key is the caller's full description of what was
// compiled (source hash, options, architecture, compiler and library versions);
// the file stores it whole, so two keys of one hash never mix. Each entry carries
// its payload's length and checksum, verified on every read: a truncated,
// corrupt or foreign file is removed and reported (warn()) and the caller
// recompiles; it is never loaded. Writes go to a temporary file in the same
// directory, renamed over the entry (atomic on POSIX), so a reader sees a whole
// entry or none, and concurrent processes may write the same key. A directory that
// cannot be created or written turns the disk cache off with one warning; the
// in-memory cache above it goes on. The code is device-agnostic (it is tested on
// the CPU); the ROCm backend's compiler (src/rocm/rtc.cpp) is its user.

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "pyflame/macros.h"

namespace pyflame {

// FNV-1a, 64 bits: the entry's file name and its payload checksum (not a
// defence against a forger, who could write the cache directory anyway).
PF_API uint64_t fnv1a64(std::string_view bytes);

class PF_API KernelDiskCache {
 public:
  // An empty `dir` turns the disk cache off.
  explicit KernelDiskCache(std::string dir);

  static std::string default_dir();

  bool enabled() const;
  const std::string& dir() const { return dir_; }

  // The payload stored under `key`, or nullopt (absent, or invalid: removed, with a warning).
  std::optional<std::string> load(const std::string& key);
  // Stores atomically; a failure turns the cache off with one warning.
  void store(const std::string& key, std::string_view payload);
  // Removes every entry; returns how many.
  size_t clear();

  std::string path_of(const std::string& key) const;

 private:
  void disable(const std::string& why);

  std::string dir_;
  mutable std::mutex mutex_;
  bool enabled_;
};

}  // namespace pyflame
