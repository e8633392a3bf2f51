# The GPU benchmark: needs only the kernels library (included from bench/ and from the
# QTRANSIT_GPU_ONLY configure, which has no Boost, GTest, RapidCheck or Google Benchmark).
if(QTRANSIT_HAVE_CUDA)
  add_executable(gpu_bench ${PROJECT_SOURCE_DIR}/bench/gpu_bench.cu)
  target_link_libraries(gpu_bench PRIVATE qt_kernels)
  set_target_properties(gpu_bench PROPERTIES CUDA_RUNTIME_LIBRARY Static)
endif()
