#include <atomic>
#include <cstdio>

#include "pyflame/error.h"

namespace pyflame {

namespace {
std::atomic<WarningHandler> g_handler{nullptr};
}  // namespace

void set_warning_handler(WarningHandler handler) { g_handler.store(handler); }

void warn(const std::string& message) {
  if (WarningHandler h = g_handler.load()) return h(message);
  std::fprintf(stderr, "pyflame warning: %s\n", message.c_str());
}

}  // namespace pyflame
