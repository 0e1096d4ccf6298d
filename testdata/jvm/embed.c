/* embed.c: a launcher that is not a JDK's bin/java. It dlopens the
 * libjvm.so named by its first argument, creates a JVM, looks up a JDK
 * class (loading, linking and compiling things: the JVM allocates), and
 * destroys the JVM. memtrace sees libjvm.so only at dlopen.
 *
 * Build: gcc -O2 -I$JDK/include -I$JDK/include/linux -o embed embed.c -ldl
 */
#include <dlfcn.h>
#include <jni.h>
#include <stdio.h>

typedef jint (*create_fn)(JavaVM **, void **, void *);

int main(int argc, char **argv)
{
	JavaVMInitArgs args = {.version = JNI_VERSION_1_8};
	JavaVM *vm;
	JNIEnv *env;
	void *lib;
	create_fn create;

	if (argc != 2) {
		fprintf(stderr, "usage: embed LIBJVM\n");
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	create = (create_fn)dlsym(lib, "JNI_CreateJavaVM");
	if (!create || create(&vm, (void **)&env, &args) != JNI_OK) {
		fprintf(stderr, "cannot create a JVM\n");
		return 1;
	}
	printf("%s\n", (*env)->FindClass(env, "java/util/concurrent/ConcurrentHashMap") ? "found" : "missing");
	(*vm)->DestroyJavaVM(vm);
	return 0;
}
