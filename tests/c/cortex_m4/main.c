/* tests/c_lib.rs: the C library of examples/firmware's CNN built for thumbv7em-none-eabihf
 * (`burnc model.onnx --emit c-lib --name cnn --triple thumbv7em-none-eabihf`), called from C
 * firmware on a Cortex-M4 (QEMU's MPS2-AN386): no libc, the arena a static in .bss, the
 * weights in flash inside the library. Prints the logits as float bits over semihosting and
 * exits QEMU with status 0 (1 on an error code). */
#include <stdint.h>

#include "cnn.h"
#include "input.h" /* INPUT_BITS: the input's floats as bits, written by the test */

void semihost_write0(const char *s);

static _Alignas(64) uint8_t arena[CNN_ARENA_BYTES];
static float x[CNN_INPUT_X_LEN];
static float logits[CNN_OUTPUT_LOGITS_LEN];

static void put_hex(uint32_t v) {
    char s[10];
    s[0] = ' ';
    for (int i = 0; i < 8; i++) s[1 + i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 15];
    s[9] = 0;
    semihost_write0(s);
}

static void put_u32(uint32_t v) {
    char s[12];
    int n = 11;
    s[n] = 0;
    do {
        s[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    semihost_write0(s + n);
}

int main(void) {
    for (uint32_t i = 0; i < CNN_INPUT_X_LEN; i++) {
        union { uint32_t u; float f; } b = {INPUT_BITS[i]};
        x[i] = b.f;
    }
    int32_t rc = cnn_forward(arena, x, logits);
    if (rc != CNN_OK) {
        semihost_write0("cnn_forward failed\n");
        return 1;
    }
    semihost_write0("logits:");
    for (uint32_t i = 0; i < CNN_OUTPUT_LOGITS_LEN; i++) {
        union { float f; uint32_t u; } b = {logits[i]};
        put_hex(b.u);
    }
    semihost_write0("\narena_bytes: ");
    put_u32((uint32_t)cnn_arena_bytes());
    semihost_write0(" weights_bytes: ");
    put_u32((uint32_t)cnn_weights_bytes());
    semihost_write0("\n");
    return cnn_forward(0, x, logits) == CNN_ERR_NULL ? 0 : 1;
}
