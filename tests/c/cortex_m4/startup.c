/* A minimal Cortex-M4 start-up for the C firmware test: the vector table, .data copied from
 * flash, .bss zeroed, the FPU enabled (the library is hard-float), main's status reported to
 * QEMU through semihosting. */
#include <stdint.h>

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
int main(void);

static int semihost(int op, const void *arg) {
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void semihost_write0(const char *s) { semihost(0x04, s); }

static void semihost_exit(int status) {
    /* SYS_EXIT_EXTENDED: (ADP_Stopped_ApplicationExit, status). */
    uint32_t block[2] = {0x20026, (uint32_t)status};
    semihost(0x20, block);
    for (;;) {
    }
}

void reset_handler(void) {
    uint32_t *src = &_sidata, *dst = &_sdata;
    while (dst < &_edata) *dst++ = *src++;
    for (dst = &_sbss; dst < &_ebss;) *dst++ = 0;
    /* CPACR: full access to CP10 and CP11 (the FPU). */
    *(volatile uint32_t *)0xE000ED88 |= 0xFu << 20;
    __asm__ volatile("dsb\n isb");
    semihost_exit(main());
}

static void fault_handler(void) {
    semihost_write0("fault\n");
    semihost_exit(3);
}

__attribute__((section(".isr_vector"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))&_estack, reset_handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler,
};
