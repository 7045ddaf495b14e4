#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>
int main(){
  struct sockaddr_in a={0}; a.sin_family=AF_INET; a.sin_addr.s_addr=htonl(0x7f000001);
  int A=socket(AF_INET,SOCK_DGRAM|SOCK_NONBLOCK,0); bind(A,(void*)&a,sizeof a); socklen_t l=sizeof a; getsockname(A,(void*)&a,&l);
  int one=1; setsockopt(A,SOL_SOCKET,SO_REUSEPORT,&one,sizeof one);
  int X=socket(AF_INET,SOCK_DGRAM,0); struct sockaddr_in x={0}; x.sin_family=AF_INET; x.sin_addr.s_addr=htonl(0x7f000001); bind(X,(void*)&x,sizeof x); l=sizeof x; getsockname(X,(void*)&x,&l);
  int B=socket(AF_INET,SOCK_DGRAM|SOCK_NONBLOCK,0); setsockopt(B,SOL_SOCKET,SO_REUSEPORT,&one,sizeof one);
  if(bind(B,(void*)&a,sizeof a)) perror("bind B");
  /* between bind and connect: 20 senders each send one datagram */
  int inB=0;
  for(int i=0;i<20;i++){int S=socket(AF_INET,SOCK_DGRAM,0); sendto(S,"y",1,0,(void*)&a,sizeof a); close(S);}
  connect(B,(void*)&x,sizeof x);
  char buf[8]; struct sockaddr_in src; 
  for(;;){l=sizeof src; if(recvfrom(B,buf,8,MSG_DONTWAIT,(void*)&src,&l)<0)break; inB++; if(src.sin_port!=x.sin_port) printf("B got a datagram from port %d, not its peer %d\n",ntohs(src.sin_port),ntohs(x.sin_port));}
  int inA=0; for(;;){ if(recv(A,buf,8,MSG_DONTWAIT)<0)break; inA++;}
  printf("queued on the new socket before connect: %d, on the bound one: %d\n",inB,inA);
}
