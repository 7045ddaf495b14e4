#include <sys/socket.h>
#include <netinet/in.h>
#include <poll.h>
#include <time.h>
#include <stdio.h>
#include <unistd.h>
static double now(){timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){
  int fds[4]; for(int i=0;i<4;i++){fds[i]=socket(AF_INET,SOCK_DGRAM|SOCK_NONBLOCK,0); sockaddr_in a{}; a.sin_family=AF_INET; a.sin_addr.s_addr=htonl(0x7f000001); bind(fds[i],(sockaddr*)&a,sizeof a);}
  char buf[64]; const int N=200000;
  for(int rep=0;rep<3;rep++){
  double t0=now(); for(int i=0;i<N;i++) recv(fds[i&3],buf,64,MSG_DONTWAIT); double t1=now();
  pollfd p[4]; for(int i=0;i<4;i++){p[i].fd=fds[i];p[i].events=POLLIN;}
  for(int i=0;i<N;i++) poll(p,4,0); double t2=now();
  for(int i=0;i<N;i++) poll(p,1,0); double t3=now();
  printf("recv empty %.0f ns, poll4 %.0f ns, poll1 %.0f ns\n",(t1-t0)/N,(t2-t1)/N,(t3-t2)/N);}
}
