/* What an empty receive costs, by system call: gcc -O2 empty_receive.c && ./a.out */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <time.h>
#include <string.h>
#include <stdlib.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){
  int fd=socket(AF_INET,SOCK_DGRAM|SOCK_NONBLOCK,0); struct sockaddr_in a={.sin_family=AF_INET}; a.sin_addr.s_addr=htonl(0x7f000001); bind(fd,(void*)&a,sizeof a);
  int on=1; setsockopt(fd,17,104/*UDP_GRO*/,&on,sizeof on);
  enum{N=32}; struct mmsghdr m[N]; struct iovec iov[N]; char buf[N][2048]; struct sockaddr_in6 nm[N]; char ctl[N][64];
  for(int i=0;i<N;i++){iov[i].iov_base=buf[i];iov[i].iov_len=2048;memset(&m[i],0,sizeof m[i]);m[i].msg_hdr.msg_iov=&iov[i];m[i].msg_hdr.msg_iovlen=1;m[i].msg_hdr.msg_name=&nm[i];m[i].msg_hdr.msg_namelen=sizeof nm[i];m[i].msg_hdr.msg_control=ctl[i];m[i].msg_hdr.msg_controllen=64;}
  int ep=epoll_create1(0); struct epoll_event ev={.events=EPOLLIN}; epoll_ctl(ep,EPOLL_CTL_ADD,fd,&ev); struct epoll_event out[4];
  int K=2000000; double t;
  for(int rep=0;rep<2;rep++){
  t=now(); for(int i=0;i<K;i++) recvmmsg(fd,m,N,MSG_DONTWAIT|MSG_TRUNC,NULL); printf("recvmmsg(32) empty %.0f ns\n",(now()-t)/K);
  t=now(); for(int i=0;i<K;i++) recvmsg(fd,&m[0].msg_hdr,MSG_DONTWAIT|MSG_TRUNC); printf("recvmsg empty %.0f ns\n",(now()-t)/K);
  t=now(); for(int i=0;i<K;i++) recv(fd,buf[0],2048,MSG_DONTWAIT); printf("recv empty %.0f ns\n",(now()-t)/K);
  struct pollfd p={.fd=fd,.events=POLLIN}; t=now(); for(int i=0;i<K;i++) poll(&p,1,0); printf("poll(1) %.0f ns\n",(now()-t)/K);
  t=now(); for(int i=0;i<K;i++) epoll_wait(ep,out,4,0); printf("epoll_wait %.0f ns\n",(now()-t)/K);
  int q; t=now(); for(int i=0;i<K;i++) ioctl(fd,FIONREAD,&q); printf("FIONREAD %.0f ns\n",(now()-t)/K);
  }
}
