#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  for(int k=0;k<3;k++){double t0=now();unsigned long long c0=__rdtsc();sleep(2);double t1=now();unsigned long long c1=__rdtsc();
  printf("tsc rate %.3f MHz over %.3f s\n",(c1-c0)/(t1-t0)/1e6,t1-t0);}
  return 0;}
