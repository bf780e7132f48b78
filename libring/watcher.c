/* watcher.c: being written. */
