// pixman: SIMD image scaling (bilinear and nearest) for TilepackImaging's resampling.
#include <pixman.h>
