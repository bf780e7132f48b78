/* etcd_elect.c: being written. */
