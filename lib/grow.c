// SPDX-License-Identifier: MIT
#include "vpack/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *vpack_grow(void *arr, size_t n, size_t *cap, size_t size)
{
    size_t ncap;
    void *grown;

    if (n < *cap)
        return arr;
    ncap = *cap ? *cap * 2 : 4;
    if (ncap > SIZE_MAX / size || !(grown = realloc(arr, ncap * size)))
        return NULL;
    *cap = ncap;
    return grown;
}
