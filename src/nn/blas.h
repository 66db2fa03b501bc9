/* OpenBLAS's entry points, internal to src/nn/: blas.c loads the library
 * (kaiten/model.h: kt_blas_load), matmul.c calls them. */
#ifndef KAITEN_NN_BLAS_H
#define KAITEN_NN_BLAS_H

#include <cblas.h>

/* NULL before kt_blas_load has loaded OpenBLAS. */
typedef struct {
  __typeof__(cblas_sgemm) *sgemm;
  __typeof__(openblas_set_num_threads) *set_threads;
  __typeof__(openblas_get_num_threads) *get_threads;
  __typeof__(openblas_get_corename) *corename;
} kt__blas_api;
extern kt__blas_api kt__blas;
/* 1 when the address space left (ulimit -v) holds OpenBLAS's buffers for
 * `threads` more threads that run matrix products. */
int kt__blas_room(int threads);

#endif
