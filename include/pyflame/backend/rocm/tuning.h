#pragma once
// MIOpenTuningCache (seed 000): which algorithm the DNN library runs for each
// convolution problem. A problem is searched once (exhaustively, timing every
// algorithm, when exhaustive search is on; else by the library's heuristics),
// then reused from memory; with a cache file the choices also persist across
// processes. The key holds the direction (forward, or backward data for the
// transposed convolution), shapes, parameters, dtype, math mode, GPU
// architecture and DNN library version, so a cache written on another GPU or
// by another library version is never reused (its entries simply never match).
//
// On AMD, MIOpen keeps its own find database as well; MIOPEN_FIND_MODE and
// MIOPEN_USER_DB_PATH act on it as MIOpen documents (PyFlame does not override them).
// Thread-safe.

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "pyflame/macros.h"

namespace pyflame::backend::rocm {

class PF_API MIOpenTuningCache {
 public:
  struct Config {
    bool enable_exhaustive_search = true;
    bool enable_caching = true;
    bool enable_persistence = false;
    std::string cache_file;
  };
  struct Stats {
    size_t hits;
    size_t misses;
    size_t entries;
  };
  struct Entry {
    int algo;
    size_t workspace;
    int math_type = 0;  // cuDNN: the math type the algorithm was chosen with (MIOpen: 0)
    // cuDNN's graph API: the chosen engine's global index, algo being then the engine
    // configuration's place in the heuristics' list (dnn.cpp); -1: an algorithm of the
    // legacy API (MIOpen: always -1).
    int engine = -1;
  };

  MIOpenTuningCache();  // default Config (C++ cannot default a nested struct's argument in-class)
  explicit MIOpenTuningCache(Config config);

  void enable_exhaustive_search(bool enable);
  bool exhaustive_search() const;
  // Loads the file's entries (if it exists) and writes every new choice to it.
  void set_cache_file(const std::string& path);
  // Forgets the in-memory entries and the counters; a cache file is rewritten
  // from memory on the next new choice.
  void clear();
  Stats get_stats() const;

  // For the DNN adapter: a cached choice (counted as a hit or a miss), and a new one.
  std::optional<Entry> lookup(const std::string& key);
  void insert(const std::string& key, const Entry& entry);

 private:
  void load_locked();
  void save_locked() const;

  mutable std::mutex mutex_;
  Config config_;
  std::unordered_map<std::string, Entry> entries_;
  size_t hits_ = 0, misses_ = 0;
};

PF_API MIOpenTuningCache& get_tuning_cache();

}  // namespace pyflame::backend::rocm
