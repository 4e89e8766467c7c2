#pragma once
// The shared device headers (kernels/functors.h and what it includes), as text
// compiled into the library (rtc_headers.cpp, which CMakeLists.txt generates),
// so that a run-time compiled kernel may #include "kernels/functors.h" wherever
// the library is installed.

namespace pyflame::backend::rocm {

struct RtcHeader {
  const char* name;    // as a kernel includes it: "kernels/functors.h"
  const char* source;
};
extern const RtcHeader kRtcHeaders[];
extern const int kNumRtcHeaders;

}  // namespace pyflame::backend::rocm
