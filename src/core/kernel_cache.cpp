#include "pyflame/kernel_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pyflame/error.h"

namespace pyflame {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'P', 'F', 'K', 'C', 'A', 'C', 'H', '1'};
constexpr const char* kSuffix = ".pfk";

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

// Reads a u64 at `pos`, advancing it; false past the end.
bool get_u64(std::string_view in, size_t& pos, uint64_t& v) {
  if (in.size() - pos < sizeof v) return false;
  std::memcpy(&v, in.data() + pos, sizeof v);
  pos += sizeof v;
  return true;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

KernelDiskCache::KernelDiskCache(std::string dir) : dir_(std::move(dir)), enabled_(!dir_.empty()) {}

std::string KernelDiskCache::default_dir() {
  if (const char* d = std::getenv("PYFLAME_KERNEL_CACHE")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/pyflame/kernels";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/pyflame/kernels";
  return "";
}

bool KernelDiskCache::enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enabled_;
}

std::string KernelDiskCache::path_of(const std::string& key) const { return dir_ + "/" + hex(fnv1a64(key)) + kSuffix; }

void KernelDiskCache::disable(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!enabled_) return;
    enabled_ = false;
  }
  warn("kernel cache: " + why + "; compiled kernels are kept in memory only for the rest of this process");
}

std::optional<std::string> KernelDiskCache::load(const std::string& key) {
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream buffer;
  buffer << f.rdbuf();
  const std::string file = buffer.str();
  f.close();

  // Why the entry cannot be used, or nullptr.
  const char* invalid = nullptr;
  std::string_view in(file);
  size_t pos = sizeof kMagic;
  uint64_t key_len = 0, payload_len = 0, checksum = 0;
  if (in.size() < sizeof kMagic || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0) {
    invalid = "not a PyFlame kernel-cache entry";
  } else if (!get_u64(in, pos, key_len) || in.size() - pos < key_len) {
    invalid = "truncated key";
  } else {
    const std::string_view stored_key = in.substr(pos, key_len);
    pos += key_len;
    if (!get_u64(in, pos, payload_len) || !get_u64(in, pos, checksum)) {
      invalid = "truncated header";
    } else if (in.size() - pos != payload_len) {
      invalid = "its length does not match its header (truncated or extended)";
    } else if (fnv1a64(in.substr(pos)) != checksum) {
      invalid = "its checksum does not match (corrupt)";
    } else if (stored_key != key) {
      return std::nullopt;  // another key of the same hash: a miss; store() replaces it
    } else {
      return std::string(in.substr(pos));
    }
  }
  std::error_code ec;
  fs::remove(path, ec);
  warn(std::string("kernel cache: ") + path + " was invalid (" + invalid + "); removed, the kernel is recompiled");
  return std::nullopt;
}

void KernelDiskCache::store(const std::string& key, std::string_view payload) {
  if (!enabled()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return disable("cannot create " + dir_ + " (" + ec.message() + ")");

  std::string entry(kMagic, sizeof kMagic);
  put_u64(entry, key.size());
  entry += key;
  put_u64(entry, payload.size());
  put_u64(entry, fnv1a64(payload));
  entry.append(payload.data(), payload.size());

  static std::atomic<uint64_t> counter{0};
  const std::string path = path_of(key);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return disable("cannot write in " + dir_ + " (" + std::strerror(errno) + ")");
  const bool written = std::fwrite(entry.data(), 1, entry.size(), f) == entry.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    fs::remove(tmp, ec);
    return disable("writing " + tmp + " failed (disk full?)");
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    disable("cannot rename an entry into " + dir_ + " (" + ec.message() + ")");
  }
}

size_t KernelDiskCache::clear() {
  size_t removed = 0;
  std::error_code ec;
  if (dir_.empty() || !fs::is_directory(dir_, ec)) return 0;
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (e.path().extension() == kSuffix && fs::remove(e.path(), ec)) ++removed;
  return removed;
}

}  // namespace pyflame
