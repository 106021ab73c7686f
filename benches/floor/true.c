/* The test every timed case runs: a static C program that does nothing.
 * Built with `cc -static -O2`; "direct" in the results is this alone. */
int main(void) { return 0; }
