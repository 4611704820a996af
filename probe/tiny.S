/* The tiny static program proc.exec and proc.spawn start: _start exits 0.
 * Built with -nostdlib -static and embedded into the probe (Makefile). */
	.text
	.globl _start
_start:
#if defined(__x86_64__)
	mov $60, %eax
	xor %edi, %edi
	syscall
#elif defined(__i386__)
	mov $1, %eax
	xor %ebx, %ebx
	int $0x80
#elif defined(__aarch64__)
	mov x8, #93
	mov x0, #0
	svc #0
#elif defined(__arm__)
	mov r7, #1
	mov r0, #0
	svc #0
#else
#error "tiny.S: add this architecture's exit system call"
#endif
	.section .note.GNU-stack,"",%progbits
