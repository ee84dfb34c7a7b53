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
**     {ceil(C / T), min(ceil(R / T), 65535)} with T = MATMUL_T_TILE(E), and
**     MATMUL_T_TILE1 for E = 1 (blocks take every gridDim.y-th row of tiles,
**     so R is not bounded by the grid).
**
** E = 2, 4, 8: each thread moves a square of 16 x 16 bytes: S = 16 / E rows
** of X of 16 bytes (S elements each) in, S rows of Y of 16 bytes out,
** through registers; within a warp 4 threads along C and 8 along R, so that
** a warp reads 64 contiguous bytes of 8 rows of X and writes 128 of 4 rows
** of Y. Where X's rows start on 16 bytes (its base and ldx * E), whole
** squares come in by 16-byte loads, read once (__ldcs); elsewhere, and at the
** edges, element by element, zeros past R and C.
**
** E = 1 (fp8's B^T, on every fp8 product with a row-major B): a block moves
** 128 x 128 bytes through shared memory, each thread four 4 x 4 squares of
** bytes, so that its registers stay few and blocks many (a thread of the
** squares of 16 x 16 held 64 words, and at 4096 x 4096 all of X was one wave
** of loads and then one of stores). On an H100 (bench/RESULTS.md, session
** 34) B^T of 4096 x 4096 bytes took 13-16 us this way, 15-18 the squares of
** 16 x 16, a plain copy of the same 16 MB 14-16.5 us.
**
** A programmatic dependent may follow (fp8's product, launched so where the
** catalog asks): the kernel lets it be scheduled from its start
** (culua_dep_release), and the product waits for all of it before its first
** copy (culua_dep_wait).
*/

#include <culua/common.cuh>

/* 256 threads, 16 x 16 squares of 16 x 16 bytes a block: T x T elements; the byte kernel's
** square of T1 x T1 (lua/catalog/matmul_lowp.lua reads these) */
#define MATMUL_T_THREADS 256
#define MATMUL_T_TILE(E) (256 / (E))
#define MATMUL_T_TILE1 128

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

/* the 4 x 4 bytes of words w (row j: w[j], byte u its column u) transposed: o[u] holds
** column u, byte j of it from row j */
__device__ __forceinline__ void t_bytes4 (const unsigned (&w)[4], unsigned (&o)[4]) {
  const unsigned lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
  const unsigned lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
  o[0] = __byte_perm(lo01, lo23, 0x5410);
  o[1] = __byte_perm(lo01, lo23, 0x7632);
  o[2] = __byte_perm(hi01, hi23, 0x5410);
  o[3] = __byte_perm(hi01, hi23, 0x7632);
}

/*
** Column u of the S x S square in v (v[r]: row r's 16 bytes as words), its
** bytes the square's rows 0 .. S - 1 at column u, handed to out(u, column)
** as it is made. Two bytes: pairs of halves by permutes; four and eight:
** whole words moved.
*/
template <int E, typename Out>
__device__ __forceinline__ void t_square (const unsigned (*v)[4], Out out) {
  static_assert(E == 2 || E == 4 || E == 8, "bytes go through matmul_transpose_1");
  if constexpr (E == 2) {
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

/*
** The byte kernel's tile: rows r0 .. r0 + 127 of X, columns c0 .. c0 + 127,
** read by 16-byte loads where X's rows start on 16 bytes (8 threads a row,
** a warp four whole rows of 128 bytes), else byte by byte, zeros past R and
** C; kept in shared memory as words, word k of row r at k ^ f(r), f(r) =
** (r / 4 % 32) ^ (r % 4): the four rows a warp writes at once take 32
** different banks, and so do the 32 rows 4a + j, a = 0 .. 31, that a warp
** reads at once. Thread square (a, b) reads rows 4a .. 4a + 3 of word column
** b, transposes the 4 x 4 bytes, and writes word a of Y's rows c0 + 4b ..
** c0 + 4b + 3 (a warp: 128 contiguous bytes of each), the words up to R
** rounded up to 16 (zeros past R).
*/
__device__ __forceinline__ int t1_swizzle (int r) { return ((r >> 2) & 31) ^ (r & 3); }

__device__ __forceinline__ void matmul_transpose_1 (int R, int C, const unsigned char *x, int ldx, unsigned char *y,
                                                    int ldy) {
  constexpr int T = MATMUL_T_TILE1;
  static_assert(T == 128 && MATMUL_T_THREADS == 256, "128 rows of 32 words, 4 squares of 4 x 4 a thread");
  __shared__ unsigned s[T][T / 4];
  culua_dep_release();   /* as matmul_transpose's */
  const int t = threadIdx.x, q = t & 7, c0 = blockIdx.x * T;
  const bool vec = ((size_t)x % 16 == 0) && ldx % 16 == 0;
  const int rpad = (R + 15) & ~15;   /* Y's rows are written up to here */
  for (int r0 = blockIdx.y * T; r0 < R; r0 += gridDim.y * T) {
    const bool whole = vec && r0 + T <= R && c0 + T <= C;
    unsigned v[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int r = (t >> 3) + 32 * i, c = c0 + 16 * q;
      const unsigned char *row = x + (size_t)(r0 + r) * ldx;
      if (whole || (vec && r0 + r < R && c + 16 <= C)) {
        const uint4 u = __ldcs((const uint4 *)(row + c));
        v[i][0] = u.x, v[i][1] = u.y, v[i][2] = u.z, v[i][3] = u.w;
      } else if (r0 + r < R) {
        t_row_part<1>(row, c, C, v[i]);
      } else {
        v[i][0] = v[i][1] = v[i][2] = v[i][3] = 0;
      }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int r = (t >> 3) + 32 * i, f = t1_swizzle(r);
#pragma unroll
      for (int w = 0; w < 4; w++) s[r][(4 * q + w) ^ f] = v[i][w];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int a = t & 31, b = (t >> 5) + 8 * k;   /* rows 4a .., word column b */
      unsigned w[4], o[4];
#pragma unroll
      for (int j = 0; j < 4; j++) w[j] = s[4 * a + j][b ^ t1_swizzle(4 * a + j)];
      t_bytes4(w, o);
      if (whole || r0 + 4 * a < rpad) {
#pragma unroll
        for (int u = 0; u < 4; u++)
          if (whole || c0 + 4 * b + u < C) __stcs((unsigned *)(y + (size_t)(c0 + 4 * b + u) * ldy + r0 + 4 * a), o[u]);
      }
    }
    __syncthreads();   /* the tile's words are read: the next tile may write them */
  }
}

/* eight blocks a multiprocessor: 32 registers a thread (76 unbounded, three blocks), no spills */
extern "C" __global__ void __launch_bounds__(MATMUL_T_THREADS, 8)
culua_matmul_transpose_1 (int R, int C, const void *X, int ldx, void *Y, int ldy) {
  matmul_transpose_1(R, C, (const unsigned char *)X, ldx, (unsigned char *)Y, ldy);
}

#define MATMUL_TRANSPOSE(E) \
  extern "C" __global__ void __launch_bounds__(MATMUL_T_THREADS) \
  culua_matmul_transpose_##E (int R, int C, const void *X, int ldx, void *Y, int ldy) { \
    matmul_transpose<E>(R, C, X, ldx, Y, ldy); \
  }

MATMUL_TRANSPOSE(2)
MATMUL_TRANSPOSE(4)
MATMUL_TRANSPOSE(8)
