// MIOpenTuningCache (see pyflame/backend/rocm/tuning.h). The cache file is
// plain text, one choice per line: key TAB algorithm TAB workspace TAB math
// type, then TAB engine for a choice of cuDNN's graph API only (dnn.cpp).
// It is rewritten whole through a temporary file and a rename, so a crash
// never leaves half a file; unreadable lines are skipped.

#include "pyflame/backend/rocm/tuning.h"

#include <cinttypes>
#include <cstdio>
#include <memory>

#include "pyflame/error.h"

namespace pyflame::backend::rocm {

MIOpenTuningCache::MIOpenTuningCache() : MIOpenTuningCache(Config{}) {}

MIOpenTuningCache::MIOpenTuningCache(Config config) : config_(std::move(config)) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (config_.enable_persistence && !config_.cache_file.empty()) load_locked();
}

void MIOpenTuningCache::enable_exhaustive_search(bool enable) {
  std::lock_guard<std::mutex> lock(mutex_);
  config_.enable_exhaustive_search = enable;
}

bool MIOpenTuningCache::exhaustive_search() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_.enable_exhaustive_search;
}

void MIOpenTuningCache::set_cache_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  config_.cache_file = path;
  config_.enable_persistence = !path.empty();
  if (config_.enable_persistence) load_locked();
}

void MIOpenTuningCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  hits_ = misses_ = 0;
}

MIOpenTuningCache::Stats MIOpenTuningCache::get_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {hits_, misses_, entries_.size()};
}

std::optional<MIOpenTuningCache::Entry> MIOpenTuningCache::lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = config_.enable_caching ? entries_.find(key) : entries_.end();
  if (it == entries_.end()) {
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  return it->second;
}

void MIOpenTuningCache::insert(const std::string& key, const Entry& entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!config_.enable_caching) return;
  entries_[key] = entry;
  if (config_.enable_persistence && !config_.cache_file.empty()) save_locked();
}

namespace {
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;
}  // namespace

// C stdio rather than file streams: where the toolchain links libstdc++
// statically into each library (the GPU machine's GCC does), a std::ofstream
// in this library crashed writing a number inside a Python process that had
// other copies of libstdc++ loaded. stdio has no such per-copy locale state.
void MIOpenTuningCache::load_locked() {
  File in(std::fopen(config_.cache_file.c_str(), "r"));
  if (!in) return;  // no file yet: it is written on the first new choice
  std::string line;
  for (int c; (c = std::fgetc(in.get())) != EOF || !line.empty();) {
    if (c != '\n' && c != EOF) {
      line.push_back(static_cast<char>(c));
      continue;
    }
    const size_t tab = line.find('\t');
    Entry e{};
    unsigned long long workspace = 0;
    if (tab != std::string::npos &&
        std::sscanf(line.c_str() + tab + 1, "%d\t%llu\t%d\t%d", &e.algo, &workspace, &e.math_type, &e.engine) >= 3) {
      e.workspace = static_cast<size_t>(workspace);
      entries_[line.substr(0, tab)] = e;
    }
    line.clear();
    if (c == EOF) break;
  }
}

void MIOpenTuningCache::save_locked() const {
  const std::string tmp = config_.cache_file + ".tmp";
  {
    File out(std::fopen(tmp.c_str(), "w"));
    PF_CHECK(out != nullptr, ValueError, "MIOpenTuningCache: cannot write the cache file '", config_.cache_file, "'");
    bool ok = true;
    for (const auto& [key, e] : entries_) {
      ok = ok && std::fprintf(out.get(), "%s\t%d\t%llu\t%d", key.c_str(), e.algo,
                              static_cast<unsigned long long>(e.workspace), e.math_type) > 0;
      if (e.engine >= 0) ok = ok && std::fprintf(out.get(), "\t%d", e.engine) > 0;
      ok = ok && std::fputc('\n', out.get()) != EOF;
    }
    ok = std::fflush(out.get()) == 0 && ok;
    PF_CHECK(ok, ValueError, "MIOpenTuningCache: writing '", tmp, "' failed");
  }
  PF_CHECK(std::rename(tmp.c_str(), config_.cache_file.c_str()) == 0, ValueError,
           "MIOpenTuningCache: cannot replace the cache file '", config_.cache_file, "'");
}

MIOpenTuningCache& get_tuning_cache() {
  static MIOpenTuningCache cache;
  return cache;
}

}  // namespace pyflame::backend::rocm
