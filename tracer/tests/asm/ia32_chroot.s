# A 32-bit process making 1000 ia32 syscalls numbered 61: chroot there, wait4 in x86_64's
# table. Built with `as --32` and `ld -m elf_i386` (no libc); exits 0.
.globl _start
.text
_start:
    mov $1000, %esi
1:  mov $61, %eax
    mov $path, %ebx
    int $0x80
    dec %esi
    jnz 1b
    mov $1, %eax
    xor %ebx, %ebx
    int $0x80
.data
path: .asciz "/nonexistent-tracer-ia32"
