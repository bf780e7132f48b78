/* etcd_watch.c: being written. */
