#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "pyflame/error.h"
#include "pyflame/kernel_cache.h"

using namespace pyflame;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> g_warnings;
void capture(const std::string& message) { g_warnings.push_back(message); }

// A fresh directory and captured warnings for one test.
struct Scratch {
  fs::path dir;
  Scratch() {
    static int n = 0;
    dir = fs::temp_directory_path() / ("pf_kernel_cache_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(dir);
    g_warnings.clear();
    set_warning_handler(&capture);
  }
  ~Scratch() {
    set_warning_handler(nullptr);
    fs::remove_all(dir);
  }
};

std::string random_payload(size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void write_file(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

}  // namespace

TEST_CASE("kernel cache: an entry round-trips, and a missing one is a miss") {
  Scratch s;
  KernelDiskCache cache(s.dir.string());
  const std::string payload = random_payload(4099);
  CHECK_FALSE(cache.load("key a").has_value());
  cache.store("key a", payload);
  auto got = cache.load("key a");
  REQUIRE(got.has_value());
  CHECK(*got == payload);
  CHECK_FALSE(cache.load("key b").has_value());
  CHECK(g_warnings.empty());
  // A second cache over the same directory (another process) reads it.
  KernelDiskCache other(s.dir.string());
  CHECK(other.load("key a") == payload);
}

TEST_CASE("kernel cache: a corrupt, truncated or foreign entry is removed with a warning, never returned") {
  Scratch s;
  KernelDiskCache cache(s.dir.string());
  const std::string payload = random_payload(1000);
  cache.store("k", payload);
  const fs::path path = cache.path_of("k");
  const std::string good = read_file(path);

  std::string flipped = good;
  flipped[good.size() - 10] ^= 0x40;  // one bit of the payload
  std::string header_cut = good.substr(0, 12);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"checksum", flipped},
      {"length", good.substr(0, good.size() - 1)},
      {"length", good + "x"},
      {"truncated", header_cut},
      {"not a PyFlame", "hello, world, this is not a cache entry"},
      {"not a PyFlame", ""},
  };
  for (const auto& [why, bytes] : cases) {
    CAPTURE(why);
    write_file(path, bytes);
    g_warnings.clear();
    CHECK_FALSE(cache.load("k").has_value());
    REQUIRE(g_warnings.size() == 1);
    CHECK(g_warnings[0].find(why) != std::string::npos);
    CHECK_FALSE(fs::exists(path));  // removed, so the recompiled kernel replaces it
  }
  cache.store("k", payload);  // and the cache still works
  CHECK(cache.load("k") == payload);
}

TEST_CASE("kernel cache: another key of the same file name is a miss, not an error") {
  Scratch s;
  KernelDiskCache cache(s.dir.string());
  cache.store("first", "abc");
  fs::rename(cache.path_of("first"), cache.path_of("second"));  // as if the two keys' hashes collided
  CHECK_FALSE(cache.load("second").has_value());
  CHECK(g_warnings.empty());
  cache.store("second", "def");
  CHECK(cache.load("second") == std::string("def"));
}

TEST_CASE("kernel cache: a directory that cannot be made turns the disk cache off with one warning") {
  Scratch s;
  fs::create_directories(s.dir);
  write_file(s.dir / "a_file", "x");
  KernelDiskCache cache((s.dir / "a_file" / "kernels").string());  // under a regular file: even root cannot
  cache.store("k", "payload");
  cache.store("k2", "payload");
  CHECK_FALSE(cache.enabled());
  CHECK(g_warnings.size() == 1);
  CHECK_FALSE(cache.load("k").has_value());
}

TEST_CASE("kernel cache: clear removes the entries and only them; a disabled cache stores nothing") {
  Scratch s;
  KernelDiskCache cache(s.dir.string());
  cache.store("a", "1");
  cache.store("b", "2");
  write_file(s.dir / "unrelated.txt", "keep");
  CHECK(cache.clear() == 2);
  CHECK_FALSE(cache.load("a").has_value());
  CHECK(fs::exists(s.dir / "unrelated.txt"));

  KernelDiskCache off("");
  CHECK_FALSE(off.enabled());
  off.store("a", "1");
  CHECK_FALSE(off.load("a").has_value());
}

TEST_CASE("kernel cache: the default directory honours PYFLAME_KERNEL_CACHE") {
  const char* saved = std::getenv("PYFLAME_KERNEL_CACHE");
  const std::string previous = saved ? saved : "";
  setenv("PYFLAME_KERNEL_CACHE", "/tmp/pf_somewhere", 1);
  CHECK(KernelDiskCache::default_dir() == "/tmp/pf_somewhere");
  unsetenv("PYFLAME_KERNEL_CACHE");
  CHECK(KernelDiskCache::default_dir().find("pyflame/kernels") != std::string::npos);
  if (saved) setenv("PYFLAME_KERNEL_CACHE", previous.c_str(), 1);
}

TEST_CASE("fnv1a64 gives the published values") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ull);
}
