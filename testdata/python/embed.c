/*
 * Fixture for memtrace's Python tests (cmd/memtrace e2e_python_test.go):
 * a C program that embeds libpython3.x.so and runs the script named by
 * argv[1] in it, as a program that scripts itself in Python does. The
 * interpreter is then a shared library of a program that is not python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: embed SCRIPT\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	Py_Initialize();
	int rc = PyRun_SimpleFileExFlags(f, argv[1], 1, NULL);
	Py_FinalizeEx();
	return rc ? 1 : 0;
}
