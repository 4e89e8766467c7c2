# Which flavour of PyFlame this build makes (docs/rocm.md, "Building").
#
# PYFLAME_USE_ROCM, from the environment (what `pip install .` passes on) or
# as -D (kept in the build folder's cache, as -D options are), forces the
# ROCm backend on (1) or off (0); PYFLAME_HIP_PLATFORM
# (amd or nvidia) likewise picks the platform. Where PYFLAME_USE_ROCM is not
# given, the machine decides, so that a user on a GPU machine gets the GPU
# without reading docs:
#   AMD     hipcc and rocBLAS (ROCm, under ROCM_PATH) and an AMD GPU (/dev/kfd);
#           MIOpen is used when installed (the DNN adapter), else left out;
#   NVIDIA  nvcc, cuBLAS and cuDNN 9 (the CUDA toolkit, the system, or NVIDIA's
#           Python wheels nvidia-cublas and nvidia-cudnn-cu13) and an NVIDIA GPU
#           (/dev/nvidiactl);
#   CPU     otherwise.
# A toolchain without a GPU (a build machine, CI) builds the CPU flavour unless
# asked: compiling the GPU kernels takes minutes and nothing could run them.
# The choice and its reason are printed, and installed as pyflame/build_flavour.txt.
#
# Sets PYFLAME_USE_ROCM (ON/OFF) and PYFLAME_HIP_PLATFORM; on NVIDIA also
# PYFLAME_NVIDIA_LIBS (the wheels' directories) and CMAKE_CUDA_COMPILER where
# nvcc is not on PATH; PYFLAME_WITH_DNN OFF on AMD without MIOpen.

set(_truthy "^(1|ON|on|On|TRUE|true|True|YES|yes|Y|y)$")

# The NVIDIA libraries' directories from the Python environment's wheels.
if(NOT PYFLAME_NVIDIA_LIBS)
  execute_process(COMMAND "${Python_EXECUTABLE}" -c "import nvidia; print(';'.join(nvidia.__path__))"
                  OUTPUT_VARIABLE PYFLAME_NVIDIA_LIBS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()

# Whether the NVIDIA toolchain is complete: sets ${ok} and ${why}.
function(_pyflame_nvidia_toolchain ok why)
  find_program(_nvcc nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin PATHS /usr/local/cuda/bin)
  if(NOT _nvcc)
    set(${ok} OFF PARENT_SCOPE)
    set(${why} "no nvcc" PARENT_SCOPE)
    return()
  endif()
  get_filename_component(_cuda_root "${_nvcc}" DIRECTORY)
  get_filename_component(_cuda_root "${_cuda_root}" DIRECTORY)
  set(_hints ${_cuda_root}/include ${_cuda_root}/lib64 ${_cuda_root}/lib)
  foreach(p ${PYFLAME_NVIDIA_LIBS})
    foreach(sub cu13 cu12 cublas cudnn)
      list(APPEND _hints ${p}/${sub}/include ${p}/${sub}/lib)
    endforeach()
  endforeach()
  find_path(_cublas_h cublas_v2.h HINTS ${_hints})
  find_library(_cublas NAMES cublas libcublas.so.13 libcublas.so.12 NAMES_PER_DIR HINTS ${_hints})
  find_path(_cudnn_h cudnn.h HINTS ${_hints})
  find_library(_cudnn NAMES cudnn libcudnn.so.9 NAMES_PER_DIR HINTS ${_hints})
  set(_missing "")
  if(NOT _cublas_h OR NOT _cublas)
    list(APPEND _missing "cuBLAS")
  endif()
  if(NOT _cudnn_h OR NOT _cudnn)
    list(APPEND _missing "cuDNN 9")
  endif()
  if(_missing)
    string(REPLACE ";" " and " _missing "${_missing}")
    set(${ok} OFF PARENT_SCOPE)
    set(${why} "nvcc (${_nvcc}) but no ${_missing} (pip install nvidia-cublas nvidia-cudnn-cu13)" PARENT_SCOPE)
    return()
  endif()
  set(${ok} ON PARENT_SCOPE)
  set(${why} "nvcc (${_nvcc}), cuBLAS and cuDNN" PARENT_SCOPE)
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${_nvcc}" CACHE FILEPATH "nvcc")
  endif()
endfunction()

# Whether the AMD toolchain is complete: sets ${ok}, ${why} and ${with_dnn}.
function(_pyflame_amd_toolchain ok why with_dnn)
  find_program(_hipcc hipcc HINTS ${ROCM_PATH}/bin)
  find_file(_rocblas_config rocblas-config.cmake HINTS ${ROCM_PATH}/lib/cmake/rocblas)
  find_file(_miopen_config miopen-config.cmake HINTS ${ROCM_PATH}/lib/cmake/miopen)
  set(${with_dnn} ON PARENT_SCOPE)
  if(NOT _miopen_config)
    set(${with_dnn} OFF PARENT_SCOPE)
  endif()
  if(NOT _hipcc)
    set(${ok} OFF PARENT_SCOPE)
    set(${why} "no hipcc under ${ROCM_PATH}" PARENT_SCOPE)
  elseif(NOT _rocblas_config)
    set(${ok} OFF PARENT_SCOPE)
    set(${why} "hipcc but no rocBLAS under ${ROCM_PATH}" PARENT_SCOPE)
  else()
    set(${ok} ON PARENT_SCOPE)
    set(${why} "hipcc and rocBLAS under ${ROCM_PATH}" PARENT_SCOPE)
  endif()
endfunction()

if(DEFINED ENV{PYFLAME_HIP_PLATFORM})
  set(PYFLAME_HIP_PLATFORM "$ENV{PYFLAME_HIP_PLATFORM}")
endif()
if(DEFINED ENV{PYFLAME_USE_ROCM} OR DEFINED PYFLAME_USE_ROCM)
  if(DEFINED ENV{PYFLAME_USE_ROCM})
    set(_given "$ENV{PYFLAME_USE_ROCM}")
    set(_from "PYFLAME_USE_ROCM=$ENV{PYFLAME_USE_ROCM} in the environment")
  else()
    set(_given "${PYFLAME_USE_ROCM}")
    set(_from "-DPYFLAME_USE_ROCM=${PYFLAME_USE_ROCM}")
  endif()
  if(_given MATCHES "${_truthy}")
    set(PYFLAME_USE_ROCM ON)
    if(NOT PYFLAME_HIP_PLATFORM)
      set(PYFLAME_HIP_PLATFORM amd)
    endif()
  else()
    set(PYFLAME_USE_ROCM OFF)
  endif()
  set(_reason "${_from}")
else()
  _pyflame_amd_toolchain(_amd_ok _amd_why _amd_dnn)
  _pyflame_nvidia_toolchain(_nv_ok _nv_why)
  set(PYFLAME_USE_ROCM OFF)
  if(_amd_ok AND EXISTS /dev/kfd AND NOT PYFLAME_HIP_PLATFORM STREQUAL "nvidia")
    set(PYFLAME_USE_ROCM ON)
    set(PYFLAME_HIP_PLATFORM amd)
    set(_reason "found ${_amd_why} and an AMD GPU (/dev/kfd)")
    if(NOT _amd_dnn)
      set(PYFLAME_WITH_DNN OFF)
      string(APPEND _reason "; MIOpen is not installed, so the DNN adapter is left out")
    endif()
  elseif(_nv_ok AND EXISTS /dev/nvidiactl AND NOT PYFLAME_HIP_PLATFORM STREQUAL "amd")
    set(PYFLAME_USE_ROCM ON)
    set(PYFLAME_HIP_PLATFORM nvidia)
    set(_reason "found ${_nv_why} and an NVIDIA GPU (/dev/nvidiactl)")
  else()
    set(_gpus "")
    if(EXISTS /dev/kfd)
      string(APPEND _gpus " an AMD GPU")
    endif()
    if(EXISTS /dev/nvidiactl)
      string(APPEND _gpus " an NVIDIA GPU")
    endif()
    if(NOT _gpus)
      set(_gpus " no GPU")
    endif()
    string(CONCAT _reason "no complete GPU toolchain with its GPU (AMD: ${_amd_why}; NVIDIA: ${_nv_why};"
           "${_gpus} visible); PYFLAME_USE_ROCM=1 forces a GPU flavour")
  endif()
endif()
if(NOT PYFLAME_HIP_PLATFORM)
  set(PYFLAME_HIP_PLATFORM amd)
endif()
if(PYFLAME_USE_ROCM)
  set(PYFLAME_FLAVOUR "the ${PYFLAME_HIP_PLATFORM} GPU flavour: ${_reason}")
else()
  set(PYFLAME_FLAVOUR "the CPU flavour: ${_reason}")
endif()
message(STATUS "PyFlame: building ${PYFLAME_FLAVOUR}")
# Installed with the package: `python -m pyflame.info` says what was built and why.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/build_flavour.txt "${PYFLAME_FLAVOUR}\n")
