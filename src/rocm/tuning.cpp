// MIOpenTuningCache (see pyflame/backend/rocm/tuning.h). The cache file is
// plain text, one choice per line: key TAB algorithm TAB workspace TAB math
// type. It is rewritten whole through a temporary file and a rename, so a
// crash never leaves half a file; unreadable lines are skipped.

#include "pyflame/backend/rocm/tuning.h"

#include <cstdio>
#include <fstream>
#include <sstream>

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

void MIOpenTuningCache::load_locked() {
  std::ifstream in(config_.cache_file);
  if (!in) return;  // no file yet: it is written on the first new choice
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    Entry e{};
    if (std::getline(fields, key, '\t') && fields >> e.algo >> e.workspace >> e.math_type) entries_[key] = e;
  }
}

void MIOpenTuningCache::save_locked() const {
  const std::string tmp = config_.cache_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    PF_CHECK(out.good(), ValueError, "MIOpenTuningCache: cannot write the cache file '", config_.cache_file, "'");
    for (const auto& [key, e] : entries_) out << key << '\t' << e.algo << '\t' << e.workspace << '\t' << e.math_type << '\n';
    PF_CHECK(out.good(), ValueError, "MIOpenTuningCache: writing '", tmp, "' failed");
  }
  PF_CHECK(std::rename(tmp.c_str(), config_.cache_file.c_str()) == 0, ValueError,
           "MIOpenTuningCache: cannot replace the cache file '", config_.cache_file, "'");
}

MIOpenTuningCache& get_tuning_cache() {
  static MIOpenTuningCache cache;
  return cache;
}

}  // namespace pyflame::backend::rocm
