/* tests/c_lib.rs: the C library of examples/firmware's CNN (`burnc model.onnx --emit c-lib
 * --name cnn`) called from a C program. Reads the input (raw little-endian floats) from the file
 * argv[1], prints the logits as the bits of each float (exact), then checks that bad calls
 * return their error codes and write nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn.h"

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s INPUT.f32\n", argv[0]);
        return 2;
    }
    float *x = aligned_alloc(64, round64(CNN_INPUT_X_LEN * sizeof(float)));
    uint8_t *arena = aligned_alloc(64, round64(CNN_ARENA_BYTES));
    float logits[CNN_OUTPUT_LOGITS_LEN];
    FILE *f = fopen(argv[1], "rb");
    if (!x || !arena || !f || fread(x, sizeof(float), CNN_INPUT_X_LEN, f) != CNN_INPUT_X_LEN) {
        fprintf(stderr, "cannot read %zu floats from %s\n", (size_t)CNN_INPUT_X_LEN, argv[1]);
        return 2;
    }
    fclose(f);
    if (cnn_arena_bytes() != CNN_ARENA_BYTES || cnn_weights_bytes() != CNN_WEIGHTS_BYTES) {
        fprintf(stderr, "sizes disagree with the header\n");
        return 1;
    }
    printf("names: %s %s %s rank %d shape %zu %zu %zu %zu\n", CNN_SOURCE, CNN_INPUT_X_NAME, CNN_OUTPUT_LOGITS_NAME, CNN_INPUT_X_RANK,
           CNN_INPUT_X_SHAPE[0], CNN_INPUT_X_SHAPE[1], CNN_INPUT_X_SHAPE[2], CNN_INPUT_X_SHAPE[3]);
    int32_t rc = cnn_forward(arena, x, logits);
    if (rc != CNN_OK) {
        fprintf(stderr, "cnn_forward returned %d\n", (int)rc);
        return 1;
    }
    printf("logits:");
    for (size_t i = 0; i < CNN_OUTPUT_LOGITS_LEN; i++) {
        uint32_t bits;
        memcpy(&bits, &logits[i], 4);
        printf(" %08x", (unsigned)bits);
    }
    printf("\n");

    /* Bad calls: an error code, and the output untouched. */
    float untouched[CNN_OUTPUT_LOGITS_LEN];
    memset(untouched, 0x7f, sizeof untouched);
    int null_arena = cnn_forward(NULL, x, untouched);
    int null_input = cnn_forward(arena, NULL, untouched);
    int odd_arena = cnn_forward(arena + 4, x, untouched);
    int odd_output = cnn_forward(arena, x, (float *)((char *)untouched + 1));
    int null_weights = cnn_forward_with_weights(NULL, arena, x, untouched);
    int odd_weights = cnn_forward_with_weights(arena + 8, arena, x, untouched);
    int clean = 1;
    for (size_t i = 0; i < sizeof untouched; i++) clean &= ((unsigned char *)untouched)[i] == 0x7f;
    printf("errors: %d %d %d %d %d %d untouched=%d\n", null_arena, null_input, odd_arena, odd_output, null_weights, odd_weights, clean);
    free(x);
    free(arena);
    return 0;
}
