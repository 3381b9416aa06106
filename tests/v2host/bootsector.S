/* SPDX-License-Identifier: MIT
 *
 * The "firmware" of the nested test guests (issue 29): a 512-byte boot
 * sector SeaBIOS loads at 0x7c00 and jumps to, in real mode. It spins for
 * BUSY timer ticks, then halts for IDLE ticks (sti; hlt: the vCPU thread
 * sleeps until the next tick), and again: a guest that costs BUSY/(BUSY +
 * IDLE) of a vCPU without a kernel. The BIOS's timer (the PIT at 18.2 Hz,
 * IRQ 0) counts ticks in the BIOS data area's dword at 0x46c; the ticks are
 * compared as differences, so the count's wrap does not matter.
 *
 * BUSY and IDLE are the words at offsets 0x1fa and 0x1fc (little-endian),
 * patched per guest by tests/v2host/guest-image.sh: BUSY 0 is an idle guest
 * (it only halts), IDLE 0 a busy one. Only the boot processor runs it; the
 * other vCPUs wait for a start-up IPI that never comes (their threads exist
 * and sleep).
 *
 * Build: as --32 -o b.o bootsector.S && ld -m elf_i386 -Ttext=0x7c00
 *        --oformat=binary -o bootsector.bin b.o
 */
    .code16
    .text
    .globl _start
_start:
    cli
    xor %ax, %ax
    mov %ax, %ds
    mov %ax, %ss
    mov $0x7c00, %sp
    sti
again:
    mov (busy_ticks), %cx
    jcxz idle
    mov (0x46c), %bx
spin:
    mov (0x46c), %ax
    sub %bx, %ax
    cmp %cx, %ax
    jb spin
idle:
    mov (idle_ticks), %cx
    jcxz again
    mov (0x46c), %bx
halt:
    hlt
    mov (0x46c), %ax
    sub %bx, %ax
    cmp %cx, %ax
    jb halt
    jmp again

    .org 0x1fa
busy_ticks:
    .word 0
idle_ticks:
    .word 1
    .word 0xaa55
