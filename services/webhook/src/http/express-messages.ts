/**
 * Request and response classes for `https.createServer` whose instances are born with express's
 * prototypes (`app.request`, `app.response`).
 *
 * express's `app.handle` sets the prototype of every request and response it serves to those two
 * objects. On a plain IncomingMessage/ServerResponse that is a prototype transition of each
 * object's hidden class: V8 looks up (MapUpdater::FindTargetMap) and migrates to another map,
 * twice per request, and the objects' later property accesses go megamorphic. On an object whose
 * prototype already is that one, `Object.setPrototypeOf` returns at once. node:http's
 * `IncomingMessage` and `ServerResponse` server options exist for exactly this: the server then
 * constructs these instead. Everything express and node:http do with the objects is unchanged
 * (their prototype chains are the ones express would have set; `instanceof` still holds).
 */
import http from 'node:http';
import type express from 'express';

export interface MessageClasses {
  IncomingMessage: typeof http.IncomingMessage;
  ServerResponse: typeof http.ServerResponse;
}

export function expressMessageClasses(app: express.Express): MessageClasses {
  // Plain constructor functions: a class's `prototype` cannot be replaced. `Reflect.construct`
  // runs node's own constructors with this function as new.target, so the instance's prototype
  // is this function's: express's.
  function ExpressRequest(this: unknown, ...args: unknown[]): http.IncomingMessage {
    return Reflect.construct(http.IncomingMessage, args, ExpressRequest);
  }
  ExpressRequest.prototype = app.request;
  function ExpressResponse(this: unknown, ...args: unknown[]): http.ServerResponse {
    return Reflect.construct(http.ServerResponse, args, ExpressResponse);
  }
  ExpressResponse.prototype = app.response;
  return {
    IncomingMessage: ExpressRequest as unknown as typeof http.IncomingMessage,
    ServerResponse: ExpressResponse as unknown as typeof http.ServerResponse,
  };
}
