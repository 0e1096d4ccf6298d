/* embed.c: a launcher that is not a JDK's bin/java. It dlopens the
 * libjvm.so named by its first argument, creates a JVM, looks up a JDK
 * class (loading, linking and compiling things: the JVM allocates), and
 * destroys the JVM. memtrace sees libjvm.so only at dlopen. Then it
 * waits for a byte on stdin (end of file: it goes on at once), and loads
 * more classes: a tracer that places its probes at dlopen's return, slowed
 * down by a loaded machine, still sees the JVM allocate (the JVM can start
 * and finish in less than it takes to read libjvm.so's symbols). The test
 * sends the byte once memtrace says its probes are in.
 *
 * Build: gcc -O2 -I$JDK/include -I$JDK/include/linux -o embed embed.c -ldl
 */
#include <dlfcn.h>
#include <jni.h>
#include <stdio.h>
#include <unistd.h>

typedef jint (*create_fn)(JavaVM **, void **, void *);

static const char *later[] = {
	"java/util/concurrent/ConcurrentSkipListMap", "java/util/concurrent/LinkedBlockingDeque",
	"java/util/concurrent/ForkJoinPool", "java/util/concurrent/CopyOnWriteArrayList",
	"java/util/concurrent/DelayQueue", "java/util/concurrent/Exchanger",
	"java/util/concurrent/Phaser", "java/util/concurrent/Semaphore",
	"java/util/concurrent/CyclicBarrier", "java/util/concurrent/LinkedTransferQueue",
	"java/util/TreeMap", "java/util/PriorityQueue", "java/util/IdentityHashMap",
	"java/util/WeakHashMap", "java/util/BitSet", "java/util/Scanner",
	"java/util/zip/Deflater", "java/util/zip/CRC32C", "java/time/Duration", "java/time/ZonedDateTime",
};

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
	fflush(stdout);
	char go;
	if (read(0, &go, 1) < 0)
		go = 0;
	for (int i = 0; i < sizeof(later) / sizeof(later[0]); i++) {
		if ((*env)->FindClass(env, later[i]) == NULL)
			(*env)->ExceptionClear(env);
	}
	(*vm)->DestroyJavaVM(vm);
	return 0;
}
