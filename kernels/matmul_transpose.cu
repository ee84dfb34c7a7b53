/*
** matmul_transpose.cu
** matmul's transposes: Y = X^T, a bit-exact copy of a row-major matrix into
** its transpose, for elements of 1, 2, 4 and 8 bytes (every dtype matmul
** takes). lua/catalog/matmul.lua and matmul_lowp.lua launch them:
**
**   - fp8 on compute capability 9.0 (kernels/matmul_lowp_fp8.cu): fp8 wgmma
**     reads both operands K-major, and a row-major B (K x N) is N-major, so
**     a call writes B^T (N x K) into scratch first, with the 1-byte kernel;
**   - transb (B given as B^T, N x K): every kernel that reads a row-major B
**     (all but fp8's on 9.0, which reads the caller's B^T itself where TMA
**     can address it) gets B back from B^T in scratch, with the kernel of
**     B's element size.
**
**   culua_matmul_transpose_<E> (int R, int C, const void *X, int ldx, void *Y, int ldy)
**     E = 1, 2, 4, 8: bytes an element. X is R x C, rows ldx elements apart
**     (any alignment of its elements' own); Y = X^T is C x R, rows ldy
**     elements apart, with Y's base 16-byte aligned and ldy * E a multiple
**     of 16 at least R * E rounded up to 16: each row of Y is written up to
**     that, its elements past R as zeros. 256 threads, grid
**     {ceil(C / T), min(ceil(R / T), 65535)} with T = MATMUL_T_TILE(E)
**     (blocks take every gridDim.y-th row of tiles, so R is not bounded by
**     the grid).
**
** Each thread moves a square of 16 x 16 bytes: S = 16 / E rows of X of 16
** bytes (S elements each) in, S rows of Y of 16 bytes out, through registers;
** within a warp 4 threads along C and 8 along R, so that a warp reads 64
** contiguous bytes of 8 rows of X and writes 128 of 4 rows of Y. Where X's
** rows start on 16 bytes (its base and ldx * E), whole squares come in by 16-
** byte loads, read once (__ldcs); elsewhere, and at the edges, element by
** element, zeros past R and C. About at a copy's speed: on an H100 the fp8
** B^T of 4096 x 4096 bytes took 15-18 us, a plain copy kernel of the same
** 16 MB 14-16.5 us in the same run, and a transpose through shared memory
** (4 x 4 bytes a thread, 128 x 128 a block) 13-16 us: too little to build
** (bench/RESULTS.md, session 34; bench/matmul_lowp.lua times it alone).
**
** A programmatic dependent may follow (fp8's product, launched so where the
** catalog asks): the kernel lets it be scheduled from its start
** (culua_dep_release), and the product waits for all of it before its first
** copy (culua_dep_wait).
*/

#include <culua/common.cuh>

/* 256 threads, 16 x 16 squares of 16 x 16 bytes a block: T x T elements (lua/catalog/matmul_lowp.lua reads these) */
#define MATMUL_T_THREADS 256
#define MATMUL_T_TILE(E) (256 / (E))

/* element e (0 .. S - 1) of a 16-byte row held as 4 words, set to v (E bytes; words zeroed before) */
template <int E>
__device__ __forceinline__ void t_put (unsigned *w, int e, unsigned long long v) {
  if constexpr (E == 8) {
    w[2 * e] = (unsigned)v;
    w[2 * e + 1] = (unsigned)(v >> 32);
  } else {
    w[(e * E) >> 2] |= (unsigned)v << (8 * ((e * E) & 3));
  }
}

/* the elements of X's row at c .. c + S - 1 that lie below C (zeros past it), as 4 words */
template <int E>
__device__ __forceinline__ void t_row_part (const unsigned char *row, int c, int C, unsigned *w) {
  w[0] = w[1] = w[2] = w[3] = 0;
  for (int e = 0; e < 16 / E && c + e < C; e++) {
    const unsigned char *p = row + (size_t)(c + e) * E;
    unsigned long long v;
    if constexpr (E == 1) v = *p;
    else if constexpr (E == 2) v = *(const unsigned short *)p;
    else if constexpr (E == 4) v = *(const unsigned *)p;
    else v = *(const unsigned long long *)p;
    t_put<E>(w, e, v);
  }
}

/*
** Column u of the S x S square in v (v[r]: row r's 16 bytes as words), its
** bytes the square's rows 0 .. S - 1 at column u, handed to out(u, column)
** as it is made. One byte: each 4 x 4 block of bytes by byte permutes, four
** columns at a time; two: pairs of halves by permutes; four and eight: whole
** words moved.
*/
template <int E, typename Out>
__device__ __forceinline__ void t_square (const unsigned (*v)[4], Out out) {
  if constexpr (E == 1) {
    /* columns 4i .. 4i + 3: word j of column 4i + u holds rows 4j .. 4j + 3, byte u of word i of each */
#pragma unroll
    for (int i = 0; i < 4; i++) {
      unsigned o[4][4];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const unsigned w0 = v[4 * j][i], w1 = v[4 * j + 1][i], w2 = v[4 * j + 2][i], w3 = v[4 * j + 3][i];
        const unsigned lo01 = __byte_perm(w0, w1, 0x5140), hi01 = __byte_perm(w0, w1, 0x7362);
        const unsigned lo23 = __byte_perm(w2, w3, 0x5140), hi23 = __byte_perm(w2, w3, 0x7362);
        o[0][j] = __byte_perm(lo01, lo23, 0x5410);
        o[1][j] = __byte_perm(lo01, lo23, 0x7632);
        o[2][j] = __byte_perm(hi01, hi23, 0x5410);
        o[3][j] = __byte_perm(hi01, hi23, 0x7632);
      }
#pragma unroll
      for (int u = 0; u < 4; u++) out(4 * i + u, make_uint4(o[u][0], o[u][1], o[u][2], o[u][3]));
    }
  } else if constexpr (E == 2) {
    /* column u is half u & 1 of word u / 2; word j of it holds rows 2j, 2j + 1 */
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const unsigned sel = (u & 1) ? 0x7632 : 0x5410, w = u >> 1;
      out(u, make_uint4(__byte_perm(v[0][w], v[1][w], sel), __byte_perm(v[2][w], v[3][w], sel),
                        __byte_perm(v[4][w], v[5][w], sel), __byte_perm(v[6][w], v[7][w], sel)));
    }
  } else if constexpr (E == 4) {
#pragma unroll
    for (int u = 0; u < 4; u++) out(u, make_uint4(v[0][u], v[1][u], v[2][u], v[3][u]));
  } else {
#pragma unroll
    for (int u = 0; u < 2; u++) out(u, make_uint4(v[0][2 * u], v[0][2 * u + 1], v[1][2 * u], v[1][2 * u + 1]));
  }
}

template <int E>
__device__ __forceinline__ void matmul_transpose (int R, int C, const void *X, int ldx, void *Y, int ldy) {
  constexpr int S = 16 / E, T = MATMUL_T_TILE(E);
  static_assert(S * E == 16 && T == 16 * S, "16 x 16 threads of S x S elements");
  /* a programmatic dependent may take its places as soon as every block of this kernel has started */
  culua_dep_release();
  const unsigned char *x = (const unsigned char *)X;
  unsigned char *y = (unsigned char *)Y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int c0 = blockIdx.x * T + ((warp & 3) * 4 + (lane & 3)) * S;
  const bool vec = ((size_t)x % 16 == 0) && ((size_t)ldx * E) % 16 == 0;
  if (c0 >= C) return;
  for (int r0 = blockIdx.y * T + ((warp >> 2) * 8 + (lane >> 2)) * S; r0 < R; r0 += gridDim.y * T) {
    unsigned v[S][4];
    if (vec && c0 + S <= C && r0 + S <= R) {   /* the whole square: 16-byte loads, X read once */
#pragma unroll
      for (int r = 0; r < S; r++) {
        const uint4 q = __ldcs((const uint4 *)(x + ((size_t)(r0 + r) * ldx + c0) * E));
        v[r][0] = q.x, v[r][1] = q.y, v[r][2] = q.z, v[r][3] = q.w;
      }
    } else {
#pragma unroll
      for (int r = 0; r < S; r++) {
        if (r0 + r < R) t_row_part<E>(x + (size_t)(r0 + r) * ldx * E, c0, C, v[r]);
        else v[r][0] = v[r][1] = v[r][2] = v[r][3] = 0;
      }
    }
    /* column c0 + u of X is row c0 + u of Y: its S elements from r0 (zeros past R) in one 16-byte store */
    t_square<E>(v, [&] (int u, uint4 col) {
      if (c0 + u < C) *(uint4 *)(y + ((size_t)(c0 + u) * ldy + r0) * E) = col;
    });
  }
}

#define MATMUL_TRANSPOSE(E) \
  extern "C" __global__ void __launch_bounds__(MATMUL_T_THREADS) \
  culua_matmul_transpose_##E (int R, int C, const void *X, int ldx, void *Y, int ldy) { \
    matmul_transpose<E>(R, C, X, ldx, Y, ldy); \
  }

MATMUL_TRANSPOSE(1)
MATMUL_TRANSPOSE(2)
MATMUL_TRANSPOSE(4)
MATMUL_TRANSPOSE(8)
