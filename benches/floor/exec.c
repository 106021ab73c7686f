/* The floor: the least a static glibc wrapper can cost. It does nothing but
 * exec its arguments, so its whole cost over a direct exec is one more
 * process image and glibc's static start-up (which, on virtual machines,
 * includes CPUID instructions that trap to the hypervisor). Built with
 * `cc -static -O2`; a wrapper's ratio to this is what its own code costs. */
#include <unistd.h>
int main(int argc, char **argv) { (void)argc; execv(argv[1], argv + 1); return 127; }
