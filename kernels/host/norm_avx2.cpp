// The AVX2 build of layer norm's row loops (layer_norm_loops.h; norm.cpp has the baseline one and calls
// this only where choose_avx2() says so). Built with -mavx2 -mfma (CMakeLists.txt) and -ffp-contract=off
// like every host file: the same roundings as the baseline build, on wider registers.
#define ADCUDA_HOST_ISA avx2
#include "layer_norm_loops.h"
